# One training step per chip (Gantt): each op of each stream as a box from start to end,
# coloured by category. Data: dat, one block per category: "start_ms end_ms row", with the
# category as the block's first line; rows: "row label".
width = 1400
height = 300 + 22 * nrows
load plotdir.'/common.gp'
set title 'Timeline of one step: '.ttl
set xlabel 'time (ms)'
set ylabel ''
set yrange [nrows-0.3:-0.7]  # chip 0 on top
set style fill solid 1.0 noborder
set key outside right top
set grid xtics nomxtics noytics
set ytics scale 0
plot rows using (NaN):1:ytic(2) notitle, \
     for [i=0:nblocks-1] dat index i using (($1+$2)/2):3:(($2-$1)/2):(0.38) with boxxyerror \
       title columnheader(1) lc rgb word(colours, i+1)
