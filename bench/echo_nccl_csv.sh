#!/bin/sh
# echo_nccl_csv.sh: turns Echo's nccl-tests logs (data/published/echo-nccl/logs/nccl_N.log,
# all_reduce_perf on N A100s of Azure ND A100 v4) into two files of data/published/echo-nccl:
#   allreduce.csv       one row per (GPUs, size): the out-of-place and in-place time (us) and
#                       busbw (GB/s) as logged;
#   nccl-allreduce.csv  the same rows as a measurement file for `trainsim validate --against`
#                       (docs/accuracy.md): busbw from the mean of the two runs' times, grouped
#                       by GPUs and by size range (1 MiB-1 GiB, the issue's target range; below
#                       1 MiB; above 1 GiB). The first size of each sweep across nodes (1 KiB)
#                       is a group of its own, "first size (start-up)": nccl-tests times it
#                       right after its warm-up, and it pays a one-off start-up cost the sizes
#                       after it do not (16 nodes: 1,242 us out-of-place, 92 us in-place right
#                       after; 2 KiB 103 / 92 us), so it is not a steady-state all-reduce.
# The 1-GPU log (no communication) is left out. Re-running it reproduces both files byte for byte.
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
{
  echo "# Echo's nccl-tests all_reduce_perf on Azure ND A100 v4 (PROVENANCE.txt), written by"
  echo "# bench/echo_nccl_csv.sh: busbw = size / mean(out-of-place, in-place time) x 2(n-1)/n."
  echo "# \"first size (start-up)\": the first size of each sweep across nodes (1 KiB) pays a"
  echo "# one-off start-up cost (16 nodes: 1,242 us out-of-place, 92 us in-place); not steady state."
  echo "group,topology,vary,collective,size_bytes,busbw_GBps"
  awk -F, 'NR > 1 {
      n = $1; nodes = $2; b = $3; t = ($4 + $6) / 2
      range = b < 1048576 ? " < 1 MiB" : b > 1073741824 ? " > 1 GiB" : ""
      if (nodes > 1 && !(n in first)) first[n] = b
      if (nodes > 1 && b == first[n]) range = " first size (start-up)"
      if (nodes == 1) {
        topo = "azure-nd-a100-v4-1node"; vary = n == 8 ? "" : "dim.node.size=" n
        where = "1 node"
      } else {
        topo = "azure-nd-a100-v4-16node"; vary = nodes == 16 ? "" : "dim.net.size=" nodes
        where = nodes " nodes"
      }
      printf "ND A100 v4 %s %d GPUs%s,%s,%s,allreduce,%s,%.4g\n", where, n, range, topo, vary, b,
             b / t / 1e3 * 2 * (n - 1) / n
    }' "$dir/allreduce.csv"
} >"$dir/nccl-allreduce.csv"
