#!/usr/bin/env bash
# Issue 15 targets for the simgrid backend: whole `trainsim run` commands, CPU seconds (user +
# system, the process and its SimGrid child) and peak RSS from /usr/bin/time, simulated step
# time and flows. One run each (they are long); run under `nice -n 19` on a shared machine.
# Usage: bench/bench_simgrid_scale.sh [build dir] [case ...]   (prints a Markdown table)
# Cases: gpt3-1024 gpt3-1024-fold resnet-16k resnet-65k llama-16k; default all. gpt3-1024-fold is
# GPT-3 175B with 192 micro-batches on the pod split so that the translation fold applies.
# gpt3-1024 folds since auto reduces its 4 x 2 replica sub-grid axis by axis (torus-dimwise);
# gpt3-1024-snake is its trace with only the gradient all-reduces changed to bidir-ring (auto's
# choice before, whose snake order cannot fold), replayed: every rank (bench/RESULTS.md, fifth
# session). Extra --cfg items for every case in $CFG (e.g. CFG="trainsim/simgrid-mode:actors").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shift || true
bin=$build/sim/trainsim
topo=$here/topologies
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(gpt3-1024 gpt3-1024-fold resnet-16k resnet-65k llama-16k)
args_of() {
  case $1 in
  gpt3-1024) echo "-t tpu-v3-pod -m gpt3-175b -b 1536 --micro-batch 1 -s tp=8,pp=16,dp=8" ;;
  gpt3-1024-snake) echo "-t tpu-v3-pod -m gpt3-175b -b 1536 --micro-batch 1 -s tp=8,pp=16,dp=8" ;;
  gpt3-1024-fold) echo "-t tpu-v3-pod -m gpt3-175b -b 768 --micro-batch 1 -s tp=8@x,dp=4@x,pp=32@y" ;;
  resnet-16k) echo "-t $topo/tpu-v3-128x128.ini -m resnet50 -b 524288 -s dp=16384" ;;
  resnet-65k) echo "-t $topo/tpu-v3-256x256.ini -m resnet50 -b 2097152 -s dp=65536" ;;
  llama-16k) echo "-t $topo/dgx-h100-2048node.ini -m llama3-405b -b 2048 --micro-batch 1 -s tp=8@node,pp=16,dp=128" ;;
  *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}
extra=()
for c in ${CFG:-}; do extra+=(--cfg "$c"); done
echo "| case | command | step_time_s | flows | cpu_s | peak_RSS_MB |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  a=$(args_of "$c")
  out=$(mktemp -d)
  cmd="trainsim run $a --backend simgrid${CFG:+ --cfg $CFG}"
  if [ "$c" = gpt3-1024-snake ]; then
    # shellcheck disable=SC2086
    "$bin" trace $a -o "$out/t.trace" > /dev/null 2>&1
    sed '/role=grad/s/algo=torus-dimwise/algo=bidir-ring/' "$out/t.trace" > "$out/g.trace"
    mkdir -p "$out/r"
    /usr/bin/time -f "cpu_s=%U+%S rss_kb=%M" -o "$out/time" \
      "$bin" replay -t tpu-v3-pod "$out/g.trace" --backend simgrid "${extra[@]}" -f json \
      > "$out/r/results.json" 2> "$out/stdout" || true
    cmd="trainsim trace $a, gradients set to bidir-ring, trainsim replay -t tpu-v3-pod --backend simgrid"
  else
    # shellcheck disable=SC2086
    /usr/bin/time -f "cpu_s=%U+%S rss_kb=%M" -o "$out/time" \
      "$bin" run $a --backend simgrid --cfg trainsim/max-memory:16GiB "${extra[@]}" -o "$out/r" \
      > "$out/stdout" 2>&1 || true
  fi
  step=$(sed -n 's/.*"step_time_s" : \([^,]*\),.*/\1/p' "$out/r/results.json" 2>/dev/null | head -1)
  [ -n "$step" ] || step="failed: $(head -c 200 "$out/stdout")"
  flows=$(sed -n 's/.*: \([0-9]*\) flows simulated.*/\1/p' "$out/stdout" | head -1)
  cpu=$(sed -n 's/.*cpu_s=\([^ ]*\).*/\1/p' "$out/time" | awk -F+ '{ printf "%.1f", $1 + $2 }')
  rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' "$out/time")
  echo "| $c | \`$cmd\` | $step | $flows | $cpu | $((rss / 1024)) |"
  rm -rf "$out"
done
