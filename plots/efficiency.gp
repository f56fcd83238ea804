# Parallel efficiency against chips: throughput per chip relative to the family's smallest
# chip count, in percent. Data: dat, one block per family: "chips efficiency_pct".
load plotdir.'/common.gp'
set title 'Parallel efficiency: '.ttl."\n(".sub.")"
set logscale x 2
set xlabel 'chips'
set ylabel 'parallel efficiency (% of throughput per chip at the fewest chips)'
set yrange [0:110]
set key inside bottom left
plot for [i=0:nblocks-1] dat index i using 1:2 title columnheader(1) lw 2, \
     100 with lines dt 2 lc rgb '#888888' title 'ideal'
