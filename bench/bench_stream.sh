#!/bin/bash
# Streaming: does a trace of N ops (default 10 million, generated) replay in bounded memory
# (<= 1 GB) and under 60 s on the analytic backend, on one core? Writes the trace to a scratch
# folder, replays it with /usr/bin/time, prints ops, file size, wall time and peak RSS.
# Usage: bench/bench_stream.sh [N] [trainsim binary]   (results: bench/RESULTS.md, "Streaming")
set -euo pipefail
n=${1:-10000000}
bin=${2:-./build/sim/trainsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
  print "end" }' > "$tmp/stream.trace"
size=$(stat -c %s "$tmp/stream.trace")
/usr/bin/time -f "%e %U %M" -o "$tmp/time" taskset -c 0 "$bin" replay "$tmp/stream.trace" \
  -t dgx-a100-1node -f csv > "$tmp/out.csv"
read -r wall user rss < "$tmp/time"
echo "ops=$n file_bytes=$size wall_s=$wall user_s=$user peak_RSS_MB=$((rss / 1024))"
