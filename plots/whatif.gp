# What-if ratios: step time relative to the baseline hardware (factor 1, or the first value)
# against the varied parameter, one line per split family (best of the family at each value).
# Data: dat, one block per family: "value ratio".
load plotdir.'/common.gp'
set title 'What-if: '.ttl
set xlabel xlab
set ylabel 'step time relative to baseline (ratio)'
if (!exists('nolog')) set logscale x 2
set key inside top right
plot for [i=0:nblocks-1] dat index i using 1:2 title columnheader(1) lw 2, \
     1 with lines dt 2 lc rgb '#888888' title 'baseline'
