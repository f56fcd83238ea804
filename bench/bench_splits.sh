#!/usr/bin/env bash
# Times `trainsim run` (analytic backend, collapsed replay) for GPT-3 175B on the 1024-chip TPU
# v3 pod under pipeline, interleaved, ZeRO and recomputation splits: user CPU seconds (what the
# program costs; wall time depends on the machine's load), peak RSS, trace ops, step time.
# Usage: bench/bench_splits.sh [path/to/trainsim]   (prints a Markdown table)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/sim/trainsim}
splits=("tp=8,dp=128:1" "tp=8,pp=16,dp=8:0" "tp=8,pp=16,dp=8:1"
        "tp=8,pp=8,dp=16,schedule=interleaved:2:0" "tp=8,pp=16,dp=8,zero=1,sp,recompute=selective:0"
        "tp=8,pp=8,dp=16,zero=3,recompute=full:0")
echo "| split | micro_batch | micro_batches | trace_ops | step_time_s | user_s | wall_s | peak_RSS_MB |"
echo "|---|---|---|---|---|---|---|---|"
for entry in "${splits[@]}"; do
  split=${entry%:*}; mb=${entry##*:}
  out=$(mktemp)
  /usr/bin/time -f "%U %e %M" -o "$out.time" "$bin" run -t tpu-v3-pod -m gpt3-175b -s "$split" \
    -b 1536 --micro-batch "$mb" --format json > "$out"
  read -r user wall rss < "$out.time"
  field() { grep "\"$1\"" "$out" | tail -1 | sed 's/.*: *//; s/,$//'; }
  echo "| $split | $(field micro_batch) | $(field micro_batches) | $(field trace_ops) |" \
       "$(field step_time_s) | $user | $wall | $((rss / 1024)) |"
  rm -f "$out" "$out.time"
done
