#!/usr/bin/env bash
# Times `trainsim sweep --splits auto` (analytic backend): every valid split and placement of
# GPT-3 175B on the 1024-chip TPU v3 pod (the issue 6 target: < 30 s on 2 cores), then larger
# sweeps (micro-batches, hardware what-ifs, several topologies) with 1 and 2 worker processes.
# Prints a Markdown table: configurations, wall time, configurations per second, and whether
# the outputs of --jobs 1 and --jobs 2 are byte-identical.
# Usage: bench/bench_sweep.sh [path/to/trainsim]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/sim/trainsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=(
  "gpt3-175b pod, every split|-t tpu-v3-pod -m gpt3-175b -b 1024 --micro-batch 1 --splits auto"
  "gpt3-175b pod, every split x 4 micro-batches|-t tpu-v3-pod -m gpt3-175b -b 4096 --micro-batch 1,2,4,8 --splits auto"
  "gpt3-175b pod, every split x 3 link bandwidths x 2 peaks|-t tpu-v3-pod -m gpt3-175b -b 1024 --micro-batch 1 --splits auto --vary link_bandwidth_GBps=x0.5,x1,x2 --vary peak_tflops=x1,x2"
  "4 models x 9 topologies, every split|-t tpu-v2-8,tpu-v2-pod,tpu-v3-8x8,tpu-v3-pod,dgx-a100-4node,dgx-a100-32node,dgx-h100-4node,dgx-h100-32node,asym-16x16 -m bert-large,gpt3-1.3b,gpt3-13b,resnet50 --batch-per-chip 4 --splits auto"
)
echo "| sweep | jobs | configurations | wall_s | configurations_per_s | identical_to_jobs_1 |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  for jobs in 1 2; do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$bin" sweep $args --jobs $jobs -o "$tmp/j$jobs" > "$tmp/out"
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    n=$(($(wc -l < "$tmp/j$jobs/sweep.csv") - 1))
    rate=$(awk -v n="$n" -v w="$wall" 'BEGIN { printf "%.0f", (w > 0 ? n / w : 0) }')
    same="-"
    if [ $jobs -gt 1 ]; then
      if cmp -s "$tmp/j1/sweep.csv" "$tmp/j$jobs/sweep.csv" &&
         cmp -s "$tmp/j1/sweep.json" "$tmp/j$jobs/sweep.json"; then same=yes; else same=NO; fi
    fi
    echo "| $name | $jobs | $n | $wall | $rate | $same |"
  done
done
