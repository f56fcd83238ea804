# Memory per chip, stacked by kind, against the chip's capacity. Data: dat, one row per
# configuration: "label params grads optimizer gathered activations temp pipeline allocator
# capacity reserve" in GiB: every part of memory_per_chip_bytes, so a bar's top below the reserve
# is the table's memory/chip (the runtime reserve is stacked on top: what fits must stay under
# the capacity line). The capacity
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
     '' using 5 title 'gathered parameters (FSDP2)' lc rgb c_tp, \
     '' using 6 title 'activations' lc rgb c_dp, \
     '' using 7 title 'buffers' lc rgb c_other, \
     '' using 8 title 'pipeline buffers' lc rgb c_pp, \
     '' using 9 title 'allocator overhead' lc rgb c_bubble, \
     '' using 11 title 'runtime reserve' lc rgb '#BBBBBB', \
     '' using ($0-0.45):10:(0.9):(0) with vectors nohead lw 3 dt 2 lc rgb '#C00000' \
        title 'capacity (per chip)'
