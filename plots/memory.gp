# Memory per chip, stacked by kind, against the chip's capacity. Data: dat, one row per
# configuration: "label params grads optimizer activations temp capacity reserve" in GiB (the
# runtime reserve is stacked on top: what fits must stay under the capacity line). The capacity
# is a dashed segment across each bar's full width (a line through bar centres vanished with
# one bar).
height = 720
load plotdir.'/common.gp'
set title 'Memory per chip: '.ttl
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb '#333333'
set boxwidth 0.7
set ylabel 'memory per chip (GiB)'
set xtics rotate by -50 left font ',9'
set bmargin 16
set yrange [0:*]
plot dat using 2:xtic(1) title 'parameters' lc rgb c_fwd, \
     '' using 3 title 'gradients' lc rgb c_bwd, \
     '' using 4 title 'optimizer state' lc rgb c_opt, \
     '' using 5 title 'activations' lc rgb c_dp, \
     '' using 6 title 'buffers' lc rgb c_other, \
     '' using 8 title 'runtime reserve' lc rgb '#BBBBBB', \
     '' using ($0-0.45):7:(0.9):(0) with vectors nohead lw 3 dt 2 lc rgb '#C00000' \
        title 'capacity (per chip)'
