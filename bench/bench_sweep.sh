#!/usr/bin/env bash
# Times `trainsim sweep` (analytic backend): every valid split of GPT-3 175B on the 1024-chip
# TPU v3 pod (the issue 6 target: < 30 s on 2 cores), those that fit, a data x tensor sweep, and
# a small what-if sweep, with 1 and/or 2 worker processes. Prints a Markdown table:
# configurations, replay events, wall and CPU time, configurations per second (wall), replay
# events per CPU second of the whole sweep (planning, trace building and replay; issue 15's
# measure), the peak RSS of the largest process, and whether the outputs of --jobs 1 and
# --jobs 2 are byte-identical.
# Usage: bench/bench_sweep.sh [path/to/trainsim]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/sim/trainsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# name|jobs to try|sweep arguments
cases=(
  "GPT-3 175B pod: every split (degrees x placements x ZeRO stages)|2|-t tpu-v3-pod -m gpt3-175b -b 1536 --splits auto"
  "GPT-3 175B pod: every split that fits, full recomputation|2|-t tpu-v3-pod -m gpt3-175b -b 1536 --splits auto --fits-only --recompute full"
  "GPT-3 175B pod: every split, data x tensor only (micro-batch 1)|1 2|-t tpu-v3-pod -m gpt3-175b -b 1024 --micro-batch 1 --splits 'tp=1;tp=2@x;tp=4@x;tp=8@x;tp=16@x;tp=32@x;tp=2@y;tp=4@y;tp=8@y;tp=16@y;tp=32@y'"
  "BERT-Large 8x8: every split x 3 link bandwidths|1 2|-t tpu-v3-8x8 -m bert-large -b 512 --splits auto --vary link_bandwidth_GBps=x0.5,x1,x2"
)
echo "| sweep | jobs | configurations | replay_events | wall_s | cpu_s | configurations_per_s | events_per_cpu_s | peak_RSS_MB | identical_to_jobs_1 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r name jobs_list args <<< "$c"
  for jobs in $jobs_list; do
    # Wall time, and CPU time of the sweep and its workers (user + system): on a shared
    # machine the wall time includes other programs' load, the CPU time does not.
    eval "/usr/bin/time -f '%e %U %S %M' -o \"$tmp/time\" \"$bin\" sweep $args --jobs $jobs -o \"$tmp/j$jobs\"" > "$tmp/out"
    read -r wall user sys rss < "$tmp/time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
    n=$(($(wc -l < "$tmp/j$jobs/sweep.csv") - 1))
    rate=$(awk -v n="$n" -v w="$wall" 'BEGIN { printf "%.1f", (w > 0 ? n / w : 0) }')
    events=$(grep -o '"replay_events" : [0-9]*' "$tmp/j$jobs/sweep.json" | awk '{ s += $3 } END { print s + 0 }')
    same="-"
    if [ "$jobs" -gt 1 ] && [ -f "$tmp/j1/sweep.csv" ]; then
      if cmp -s "$tmp/j1/sweep.csv" "$tmp/j$jobs/sweep.csv" &&
         cmp -s "$tmp/j1/sweep.json" "$tmp/j$jobs/sweep.json"; then same=yes; else same=NO; fi
    fi
    eps=$(awk -v e="$events" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0 ? e / c : 0) }')
    echo "| $name | $jobs | $n | $events | $wall | $cpu | $rate | $eps | $((rss / 1024)) | $same |"
  done
  rm -rf "$tmp"/j*
done
