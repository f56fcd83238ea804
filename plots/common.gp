# Shared look of trainsim's plots; loaded by every plots/*.gp script.
# Variables given with -e by trainsim plot: term ('png' or 'svg'), out (output file),
# plotdir (this folder), and each script's data files.
if (!exists('width')) width = 960
if (!exists('height')) height = 600
if (term eq 'svg') {
  set terminal svg size width,height dynamic font 'Sans,12' background rgb 'white'
} else {
  set terminal pngcairo size width,height font 'Sans,11' background rgb 'white'
}
set output out
# Labels are split names such as tp@x:8,dp@y: no enhanced-text markup (@ and _ are literal).
set termoption noenhanced
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set key outside right top box opaque width 2
set style data linespoints
set pointsize 1.2
# Category colours, shared by breakdown and timeline plots (colour-blind safe, Okabe-Ito).
c_fwd = '#0072B2'; c_bwd = '#56B4E9'; c_opt = '#009E73'
c_tp = '#D55E00'; c_dp = '#E69F00'; c_pp = '#CC79A7'; c_other = '#999999'; c_idle = '#F0E442'
c_bubble = '#8C6D31'
