#!/bin/bash
# Streaming: does a trace of N ops (default 10 million, generated) replay in bounded memory
# (<= 1 GB) and under 60 s on the analytic backend, on one core? Writes the trace to a scratch
# folder (or reuses $TRACE when that file exists; it is kept then), replays it under
# `nice -n 19` with /usr/bin/time pinned to one core, prints ops, file size, wall time, CPU
# seconds (user, sys) and peak RSS. On a shared machine compare CPU seconds and RSS, not wall.
# Usage: [TRACE=/tmp/x.trace] bench/bench_stream.sh [N] [trainsim binary]
# (results: bench/RESULTS.md, "Streaming")
set -euo pipefail
n=${1:-10000000}
bin=${2:-./build/sim/trainsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=${TRACE:-$tmp/stream.trace}
if [ ! -s "$trace" ]; then
# 8 data-parallel ranks (one symmetric program): per layer a compute op and, every 4th op, a
# gradient all-reduce on a second stream that depends on it; a final wait.
awk -v n="$n" 'BEGIN {
  print "trainsim-trace 2"; print "ranks 8"; print "dim node 8";
  print "axis dp 8 symmetric node:8:1"; print "group 0 dp"; print "meta samples=8 model_flops=0";
  print "label 0 \"layer\""; print "label 1 \"grad all-reduce\"";
  printf "program 0 %d\n", n;
  for (i = 0; i < n - 1; i++) {
    if (i % 4 == 3) printf "%d coll cat=comm_dp stream=1 label=1 kind=allreduce algo=ring group=0 bytes=1048576 deps=%d\n", i, i - 1;
    else printf "%d compute cat=bwd stream=0 label=0 flops=1e9 mem_bytes=1e6\n", i;
  }
  printf "%d wait cat=other stream=0 label=0 deps=%d\n", n - 1, n - 2;
  print "end" }' > "$trace"
fi
size=$(stat -c %s "$trace")
/usr/bin/time -f "%e %U %S %M" -o "$tmp/time" nice -n 19 taskset -c 0 "$bin" replay "$trace" \
  -t dgx-a100-1node -f csv > "$tmp/out.csv"
read -r wall user sys rss < "$tmp/time"
step=$(awk -F, 'NR == 2 { print $10 }' "$tmp/out.csv")
echo "ops=$n file_bytes=$size step_time_s=$step wall_s=$wall user_s=$user sys_s=$sys" \
  "peak_RSS_MB=$((rss / 1024))"
