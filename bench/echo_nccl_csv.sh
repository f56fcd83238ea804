#!/bin/sh
# echo_nccl_csv.sh: turns Echo's nccl-tests logs (data/published/echo-nccl/logs/nccl_N.log,
# all_reduce_perf on N A100s of Azure ND A100 v4) into data/published/echo-nccl/allreduce.csv,
# one row per (GPUs, size): the out-of-place and in-place time (us) and busbw (GB/s) as logged.
# The 1-GPU log (no communication) is left out. Re-running it reproduces the file byte for byte.
set -eu
cd "$(dirname "$0")/.."
dir=data/published/echo-nccl
{
  echo "gpus,nodes,bytes,oop_time_us,oop_busbw_GBps,ip_time_us,ip_busbw_GBps"
  for n in 2 4 8 16 32 64 128; do
    nodes=$(((n + 7) / 8))
    tr -d '\r' <"$dir/logs/nccl_$n.log" | sed 's/^\[[0-9,]*\]<stdout>://' |
      awk -v n="$n" -v nodes="$nodes" '
        $1 ~ /^[0-9]+$/ && NF >= 12 && $4 == "sum" {
          printf "%d,%d,%s,%s,%s,%s,%s\n", n, nodes, $1, $5, $7, $9, $11
        }'
  done
} >"$dir/allreduce.csv"
