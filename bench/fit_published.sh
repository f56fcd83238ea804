#!/bin/sh
# fit_published.sh: refits trainsim's calibrations to published measurements and prints the
# tables of docs/validation-published.md: NCCL on the DGX A100 node (vTrain's nccl-tests LUT),
# on the Azure ND A100 v4 node and its HDR InfiniBand network (Echo's nccl-tests logs), and the
# DGX A100 compute (vTrain's Megatron iteration times). The data is copied with its licences
# into data/published/vtrain and data/published/echo-nccl.
#
#   bench/fit_published.sh            # everything
#   bench/fit_published.sh nccl       # the network fit and its error table only (seconds)
#   bench/fit_published.sh megatron   # the A100 compute fit (trainsim calibrate --against on
#                                     # the fitting halves, seed 20261201) and the error tables
#   TS_PUBLISHED_DUMP=/tmp/rows.csv bench/fit_published.sh megatron   # also every single-node row
#
# The A100 profile's shipped compute parameters come from bench/fit_a100.sh (the same fitting
# half, each file weighted equally, the bandwidth set); the calibrate run below refits all five
# parameters with the bandwidth inside 0.75-0.95. The compute fit replays 774 rows a few
# hundred times: its coarse stage (every 4th row) took ~35 min on the shared, loaded 2-core machine; the refinement on all rows as long again or more.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
case "${1:-all}" in
nccl) filter='nccl/*' ;;
megatron) filter='megatron/*' ;;
all) filter='*/*' ;;
*)
  echo "usage: $0 [nccl|megatron|all]" >&2
  exit 2
  ;;
esac
bench_build trainsim test_published
if [ "$filter" != 'nccl/*' ]; then
  # The fit, as a user would run it: writes the profile it finds (compare its fitted keys with
  # topologies/chips/a100-sxm4-80gb.ini) and prints the fitting and held-out MAPE.
  ./build/sim/trainsim calibrate --against data/published/vtrain/trainsim/a100.csv \
    -o "${TMPDIR:-/tmp}/a100-refit.ini"
fi
TS_PUBLISHED_REPORT=1 ./build/tests/test_published --jobs 1 --filter "$filter" 2>&1
