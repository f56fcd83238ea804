#!/bin/sh
# fit_published.sh: refits trainsim's calibrations to published measurements and prints the
# tables of docs/validation-published.md: NCCL on the DGX A100 node (vTrain's nccl-tests LUT),
# on the Azure ND A100 v4 node and its HDR InfiniBand network (Echo's nccl-tests logs), and the
# DGX A100 compute (vTrain's Megatron iteration times). The data is copied with its licences
# into data/published/vtrain and data/published/echo-nccl.
#
#   bench/fit_published.sh            # everything (~5 min: the compute refit replays 360 rows
#                                     # about a thousand times)
#   bench/fit_published.sh nccl       # the NCCL fits and their error tables (~5-10 min: the
#                                     # fits walk 9-10 parameters per machine kind)
#   bench/fit_published.sh megatron   # the compute fit and the iteration-time tables
#   TS_PUBLISHED_DUMP=/tmp/rows.csv bench/fit_published.sh megatron   # also every pp=1 row
set -eu
cd "$(dirname "$0")/.."
case "${1:-all}" in
nccl) filter='nccl/*' ;;
megatron) filter='megatron/*' ;;
all) filter='*/*' ;;
*)
  echo "usage: $0 [nccl|megatron|all]" >&2
  exit 2
  ;;
esac
cmake -S . -B build >/dev/null
cmake --build build -j2 --target test_published >/dev/null
TS_PUBLISHED_REPORT=1 TS_PUBLISHED_FIT=1 ./build/tests/test_published --jobs 1 --filter "$filter" 2>&1
