#!/usr/bin/env bash
# Times `trainsim run` on models whose layers form a graph (AmoebaNet-D cells reading the two
# cells before them; ResNet shortcuts; T5's encoder output), under pipelines: user CPU
# seconds, wall seconds, peak RSS, trace ops and replay events, step time.
# Usage: bench/bench_graph.sh [path/to/trainsim]   (prints a Markdown table)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/sim/trainsim}
cases=(
  "tpu-v2-8|amoebanet-d-18-544|128|4|pp=4,schedule=gpipe,recompute=full|analytic"
  "tpu-v2-8|amoebanet-d-18-544|128|4|pp=4,schedule=gpipe,recompute=full|simgrid"
  "tpu-v3-pod|amoebanet-d-72-512|4096|8|pp=8,dp=128|analytic"
  "tpu-v3-pod|amoebanet-d-72-512|4096|8|pp=8,dp=128|simgrid"
  "tpu-v3-pod|resnet152|8192|8|pp=4,dp=256|analytic"
  "tpu-v3-pod|t5-11b|2048|4|tp=8@x,pp=8,dp=16|analytic"
)
echo "| topology | model | layers | split | backend | trace_ops | replay_events | step_time_s | user_s | wall_s | peak_RSS_MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r topo model batch mb split backend <<< "$c"
  out=$(mktemp)
  /usr/bin/time -f "%U %e %M" -o "$out.time" "$bin" run -t "$topo" -m "$model" -s "$split" \
    -b "$batch" --micro-batch "$mb" --backend "$backend" --format json > "$out"
  read -r user wall rss < "$out.time"
  field() { grep "\"$1\"" "$out" | tail -1 | sed 's/.*: *//; s/,$//'; }
  layers=$("$bin" model -m "$model" --format json | grep '"layers"' | head -1 | sed 's/.*: *//; s/,$//')
  echo "| $topo | $model | $layers | $split | $backend | $(field trace_ops) |" \
       "$(field replay_events) | $(field step_time_s) | $user | $wall | $((rss / 1024)) |"
  rm -f "$out" "$out.time"
done
