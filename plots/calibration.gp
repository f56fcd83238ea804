# calibration.gp: predicted vs measured time of every kernel timed by `trainsim calibrate`.
# Usage: gnuplot -e "datafile='calibration.dat'; outfile='calibration.png'" plots/calibration.gp
# (`trainsim calibrate --plot calibration.png` runs exactly this). The .dat columns are
# measured_s predicted_s kind (0 gemm, 1 conv, 2 eltwise, 3 scalar-math) in_fit name.
if (!exists("datafile")) datafile = 'calibration.dat'
if (!exists("outfile")) outfile = 'calibration.png'
if (strstrt(outfile, ".svg") > 0) {
  set terminal svg size 800,760 dynamic font "sans,12"
} else {
  set terminal pngcairo size 800,760 font "sans,11"
}
set output outfile
set title "Roofline model vs measured kernel time (host CPU)"
set logscale xy
set format x "10^{%L}"
set format y "10^{%L}"
set xlabel "measured time per call (s)"
set ylabel "predicted time per call (s)"
set size square
set grid
set key top left box opaque
sel(k) = (column(3) == k) ? column(2) : NaN
plot x notitle lc rgb "black" dt 1, \
     1.15 * x title "±15%" lc rgb "gray50" dt 2, \
     0.85 * x notitle lc rgb "gray50" dt 2, \
     datafile using 1:(sel(0)) title "GEMM" with points pt 7 ps 1.1 lc rgb "#1f77b4", \
     datafile using 1:(sel(1)) title "convolution" with points pt 5 ps 1.1 lc rgb "#ff7f0e", \
     datafile using 1:(sel(2)) title "element-wise (streaming)" with points pt 9 ps 1.3 lc rgb "#2ca02c", \
     datafile using 1:(sel(3)) title "scalar math (not in fit)" with points pt 6 ps 1.1 lc rgb "#d62728"
