# Time to train and cost against chips: at each chip count the split with the fewest expected
# days. Left: days without failures, expected with failures, checkpoints and restarts, and the
# Monte Carlo 90th percentile; right: cost. Where the expected days stop falling, adding chips
# stops paying. Variables: ttl, has_cost.
# Data: dat, "chips days_no_failures days_expected days_p90 cost_usd split".
load plotdir.'/common.gp'
if (has_cost) { set multiplot layout 1,2 title 'Time to train and cost: '.ttl }
set logscale x 2
set logscale y
set xlabel 'chips'
set ylabel 'time to train (days)'
set key inside top right width 1
if (!has_cost) { set title 'Time to train: '.ttl }
plot dat using 1:2 title 'no failures' lw 2 dt 2, \
     dat using 1:3 title 'expected, with failures' lw 2, \
     dat using 1:4 title '90th percentile (Monte Carlo)' lw 1 pt 6
if (has_cost) {
  unset logscale y
  set ylabel 'cost (USD)'
  # Two decimals: costs that differ by a few percent gave ticks all printed '62 M'.
  set format y '%.2s %c'
  set key inside top left width -6
  plot dat using 1:5 title 'expected cost' lw 2 lc rgb '#D55E00'
  unset multiplot
}
