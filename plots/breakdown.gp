# Step time broken down per configuration, stacked: compute, exposed communication of each
# axis, pipeline bubble, other idle (waiting for other ranks). Data: dat, one row per
# configuration: "label compute_s exposed_tp_s exposed_dp_s exposed_pp_s exposed_other_s
# bubble_s idle_s".
height = 720
load plotdir.'/common.gp'
set title 'Step time breakdown: '.ttl
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb '#333333'
set boxwidth 0.7
set ylabel 'time per step (s)'
set xtics rotate by -50 left font ',9'
set key outside right top
set bmargin 16
plot dat using 2:xtic(1) title 'compute' lc rgb c_fwd, \
     '' using 3 title 'exposed comm (tensor)' lc rgb c_tp, \
     '' using 4 title 'exposed comm (data)' lc rgb c_dp, \
     '' using 5 title 'exposed comm (pipeline)' lc rgb c_pp, \
     '' using 6 title 'exposed comm (other)' lc rgb c_other, \
     '' using 7 title 'pipeline bubble' lc rgb c_bubble, \
     '' using 8 title 'idle (waiting)' lc rgb c_idle
