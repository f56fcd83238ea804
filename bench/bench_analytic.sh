#!/usr/bin/env bash
# Times `trainsim run` (analytic backend) for GPT-3 175B (hybrid tp=8) and ResNet-50 (data
# parallel) on 64 to 4096 chips: wall and CPU time, peak RSS and replay events per CPU second
# (issue 15's measure: the CPU time does not count other programs' load on a shared machine),
# for the default collapsed replay (one rank per class of identical ranks) and for --full.
# Usage: bench/bench_analytic.sh [path/to/trainsim]   (prints a Markdown table)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/sim/trainsim}
topos=("tpu-v3-8x8:64" "tpu-v2-pod:256" "tpu-v3-pod:1024" "$here/topologies/tpu-v3-64x64.ini:4096")
echo "| model | chips | split | replay | step_time_s | wall_s | cpu_s | peak_RSS_MB | events | events_per_cpu_s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for entry in "${topos[@]}"; do
  topo=${entry%%:*}; n=${entry##*:}
  for model in gpt3-175b resnet50; do
    if [ $model = gpt3-175b ]; then split="tp=8,dp=$((n / 8))"; batch=$((n / 8 * 8)); mb=1
    else split="dp=$n"; batch=$((n * 32)); mb=32; fi
    for mode in collapsed full; do
      extra=""; [ $mode = full ] && extra="--full"
      out=$(mktemp)
      t0=$(date +%s.%N)
      /usr/bin/time -f "%M %U %S" -o "$out.time" "$bin" run -t "$topo" -m $model -s "$split" \
        -b $batch --micro-batch $mb --format json $extra > "$out"
      t1=$(date +%s.%N)
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
      read -r rss user sys < "$out.time"
      cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
      step=$(grep -m1 '"step_time_s"' "$out" | sed 's/.*: *//; s/,$//')
      events=$(grep -m1 '"replay_events"' "$out" | tr -dc '0-9')
      eps=$(awk -v e="$events" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0 ? e / c : 0) }')
      echo "| $model | $n | $split | $mode | $step | $wall | $cpu | $((rss / 1024)) | $events | $eps |"
      rm -f "$out" "$out.time"
    done
  done
done
