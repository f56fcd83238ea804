# Predicted vs measured, one point per row of a measurement file (`trainsim validate
# --against FILE.csv -o DIR --plot`). Data: dat, one index block per group, "measured
# predicted" in the metric's unit; groups: the blocks' names, space-separated; metric: the
# quantity with its unit. Log-log, y = x and +-10% bands.
width = 760
height = 700
load plotdir.'/common.gp'
set title 'Predicted vs measured: '.metric
set logscale xy
set size square
set xlabel 'measured '.metric
set ylabel 'predicted '.metric
set key inside top left box opaque
set style data points
stats dat using 1:2 nooutput
lo = (STATS_min_x < STATS_min_y ? STATS_min_x : STATS_min_y) / 1.3
hi = (STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y) * 1.3
set xrange [lo:hi]
set yrange [lo:hi]
n = words(groups)
colours = '#0072B2 #D55E00 #009E73 #E69F00 #CC79A7 #56B4E9 #F0E442 #999999'
plot x title 'y = x' with lines lc rgb '#000000' lw 1.5, \
     1.1 * x title '+-10%' with lines lc rgb '#888888' dt 2, \
     0.9 * x notitle with lines lc rgb '#888888' dt 2, \
     for [i = 1:n] dat index (i - 1) using 1:2 title word(groups, i) \
         pt 7 ps 0.8 lc rgb word(colours, (i - 1) % 8 + 1)
