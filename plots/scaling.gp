# Step time and throughput against chips, one line per split family (best of the family at
# each chip count). Variables: ttl, sub (the title's second line), nblocks.
# Data: dat, one block per family: "chips step_time_s samples_per_s".
load plotdir.'/common.gp'
set multiplot layout 1,2 title 'Scaling: '.ttl."\n(".sub.")"
set logscale x 2
set logscale y
set xlabel 'chips'
set ylabel 'step time (s)'
set key inside top right
plot for [i=0:nblocks-1] dat index i using 1:2 title columnheader(1) lw 2
set ylabel 'throughput (samples/s)'
set key inside top left
plot for [i=0:nblocks-1] dat index i using 1:3 title columnheader(1) lw 2
unset multiplot
