# Goodput (failure-free time / expected time) against the checkpoint interval: too frequent
# and checkpoint stalls dominate, too rare and the work lost at each failure does. Variables:
# ttl, opt_min (the optimum, minutes), young_min (Young's sqrt(2 delta M)), opt_goodput.
# Data: dat, "interval_min goodput_percent".
load plotdir.'/common.gp'
set title "Goodput vs checkpoint interval: ".ttl
set xlabel 'work between checkpoints (minutes)'
set ylabel 'goodput (%)'
set logscale x
set key inside bottom center
set arrow 1 from opt_min, graph 0 to opt_min, graph 1 nohead dt 2 lc rgb '#009E73'
set arrow 2 from young_min, graph 0 to young_min, graph 1 nohead dt 3 lc rgb '#D55E00'
plot dat using 1:2 with lines lw 2 lc rgb '#0072B2' title 'expected goodput', \
     '+' using (opt_min):(opt_goodput) every ::0::0 with points pt 7 ps 1.5 lc rgb '#009E73' \
       title sprintf('optimum %.3g min', opt_min), \
     NaN with lines dt 3 lc rgb '#D55E00' title sprintf("Young's sqrt(2 delta M) %.3g min", young_min)
