#!/bin/sh
# fit_a100.sh: refits the A100 profile's compute parameters (topologies/chips/a100-sxm4-80gb.ini:
# compute_efficiency, kernel_launch_us, gemm_k_overhead; memory_bandwidth_efficiency is set, not
# fitted) to the fitting half of vTrain's Megatron runs, as the shipped values were found, and
# prints the held-out errors. The fitting half is the `set` column of
# data/published/vtrain/trainsim/a100.csv (seed 20261201); the fit minimises the mean of the two
# files' mean |error| (single-node: every third fitting row; multi-node: all 54) by coordinate
# descent with halving steps, replaying each point with `trainsim validate --against`.
#
#   bench/fit_a100.sh                 # from the shipped values (~10 min on 2 loaded cores)
#   bench/fit_a100.sh 0.7 60 100      # from another start: efficiency, launch (us), k overhead
#
# The profile in the repository is not modified: the fit runs on a copy in a temporary folder.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_build
bench_tmp
mkdir -p "$tmp/chips"
cp topologies/dgx-a100-1node.ini topologies/dgx-a100-4node.ini "$tmp/"
prof="$tmp/chips/a100-sxm4-80gb.ini"
# Fit / held-out halves of megatron-single.csv and megatron-multi.csv: row i of each is line
# i + 1 of vTrain's ground_truth file, whose set a100.csv's source column names.
for kind in single multi; do
  awk -F, -v src="ground_truth_$kind.csv" -v dir="$tmp" -v kind="$kind" -v models="$root/data/published/vtrain/models/" '
    FNR == NR { if ($0 !~ /^#/ && $1 != "topology") { split($NF, s, ":"); if (s[1] == src) set[s[2]] = $(NF - 1) } next }
    FNR == 1 { print > (dir "/" kind "-fit.csv"); print > (dir "/" kind "-held.csv"); next }
    {
      line = $0
      sub(/,dgx-a100-1node,/, ",dgx-a100-1node.ini,", line); sub(/,dgx-a100-4node,/, ",dgx-a100-4node.ini,", line)
      gsub(/,models\//, "," models, line)
      n = FNR; st = set[n]
      if (st == "fit") { if (kind == "multi" || (++k) % 3 == 0) print line > (dir "/" kind "-fit.csv") }
      else print line > (dir "/" kind "-held.csv")
    }' data/published/vtrain/trainsim/a100.csv "data/published/vtrain/megatron-$kind.csv"
done
# mean |error| of a file at the profile in $prof
err() { "$ts" validate --against "$1" -j 2 | tail -n 1 | awk '{ sub(/%/, "", $3); print $3 }'; }
# The objective at (ce, launch, k): the two fitting files' mean |error|, averaged.
eval_at() {
  sed -e "s/^compute_efficiency = .*/compute_efficiency = $1/" \
    -e "s/^kernel_launch_us = .*/kernel_launch_us = $2/" \
    -e "s/^gemm_k_overhead = .*/gemm_k_overhead = $3/" topologies/chips/a100-sxm4-80gb.ini >"$prof"
  a=$(err "$tmp/single-fit.csv")
  b=$(err "$tmp/multi-fit.csv")
  awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (a + b) / 2 }'
}
get() { awk -F' = ' -v k="$1" '$1 == k { print $2 }' topologies/chips/a100-sxm4-80gb.ini; }
ce=${1:-$(get compute_efficiency)}
la=${2:-$(get kernel_launch_us)}
kk=${3:-$(get gemm_k_overhead)}
dce=0.02 dla=2 dkk=50
best=$(eval_at "$ce" "$la" "$kk")
echo "start: compute_efficiency $ce kernel_launch_us $la gemm_k_overhead $kk -> $best%"
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b - 1e-3) }'; }
for round in 1 2; do
  for p in ce la kk; do
    moved=1
    while [ $moved = 1 ]; do
      moved=0
      for sgn in 1 -1; do
        c=$ce l=$la k=$kk
        case $p in
        ce) c=$(awk -v a="$ce" -v s="$sgn" -v d="$dce" 'BEGIN { printf "%.6g", a + s * d }') ;;
        la) l=$(awk -v a="$la" -v s="$sgn" -v d="$dla" 'BEGIN { printf "%.6g", a + s * d }') ;;
        kk) k=$(awk -v a="$kk" -v s="$sgn" -v d="$dkk" 'BEGIN { v = a + s * d; printf "%.6g", v < 0 ? 0 : v }') ;;
        esac
        f=$(eval_at "$c" "$l" "$k")
        if lt "$f" "$best"; then
          ce=$c la=$l kk=$k best=$f moved=1
          echo "round $round: compute_efficiency $ce kernel_launch_us $la gemm_k_overhead $kk -> $best%"
          break
        fi
      done
    done
  done
  dce=$(awk -v d="$dce" 'BEGIN { print d / 2 }')
  dla=$(awk -v d="$dla" 'BEGIN { print d / 2 }')
  dkk=$(awk -v d="$dkk" 'BEGIN { print d / 2 }')
done
echo "fit: compute_efficiency $ce kernel_launch_us $la gemm_k_overhead $kk (objective $best%)"
eval_at "$ce" "$la" "$kk" >/dev/null
for f in single-fit single-held multi-fit multi-held; do
  echo "$f: mean |error| $(err "$tmp/$f.csv")%"
done
