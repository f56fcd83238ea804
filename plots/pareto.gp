# Cost against days for every planned split and chip count, and the Pareto frontier (no other
# configuration is both faster and cheaper). Variables: ttl.
# Data: dat, block 0 every row "days cost_usd chips", block 1 the frontier.
load plotdir.'/common.gp'
set title 'Cost vs time to train (Pareto frontier): '.ttl
set xlabel 'time to train, expected with failures (days)'
set ylabel 'cost (USD)'
# Two decimals: costs that differ by a few percent gave ticks all printed '62 M'.
set format y '%.2s %c'
set logscale x
set key inside top right
plot dat index 0 using 1:2 with points pt 7 ps 0.8 lc rgb '#999999' title 'split x chips', \
     dat index 1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#0072B2' title 'Pareto frontier', \
     dat index 1 using 1:2:(sprintf('%d', $3)) with labels offset 1.2,0.8 font ',9' notitle
