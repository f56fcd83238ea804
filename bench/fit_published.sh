#!/bin/sh
# fit_published.sh: refits trainsim's DGX A100 calibration to vTrain's published measurements
# (nccl-tests all-reduce tables, Megatron iteration times) and prints the tables of
# docs/validation-published.md. The data is vTrain's, copied with its licence into
# data/published/vtrain.
#
#   bench/fit_published.sh            # everything (~5 min: the compute refit replays 360 rows
#                                     # about a thousand times)
#   bench/fit_published.sh nccl       # the network fit and its error table only (seconds)
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
