#!/usr/bin/env bash
# Times the split searches of the docs (`trainsim search`, `sweep --splits auto`) and the
# long-sequence Llama searches of docs/whatif.md, one worker each, and counts what they
# enumerate: configurations (splits x placements x micro-batches for search, rows for a sweep),
# and how many of them are fsdp2 and cp splits. Prints a Markdown table; CPU seconds are the
# command's and its workers' user + system time (on a shared machine the wall time includes
# other programs' load, the CPU time much less).
# Usage: [BENCH_ONLY=REGEX] bench/bench_search.sh [path/to/trainsim]   (run from anywhere)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
bin=${1:-build/sim/trainsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tt=data/published/torchtitan/models
# Llama 3 70B at 65,536 tokens: no such file is shipped; the sequence key edited.
sed 's/^sequence = .*/sequence = 65536/' models/llama3-70b.ini > "$tmp/llama3-70b-seq65536.ini"
# command|arguments (every one from README.md, docs/whatif.md or docs/planning.md)
cases=(
  "search|-t asym-16x16 -m gpt3-6.7b -b 64 --micro-batch 1"
  "search|-t tpu-v2-8 -m mlp -b 16 --bucket-MiB 0.001 --collective-algorithm ring -k 1"
  "search|-t tpu-v3-8x8 -m gpt3-1.3b -b 64"
  "search|-t dgx-a100-1node -m gpt3-350m -b 64 --vary-options --max-configs 500"
  "search|-t dgx-h100-4node -m gpt3-1.3b -b 256 --tokens 3e11 --restart-minutes 10 --objective cost -k 3"
  "search|-t dgx-h100-4node -m llama3-8b -b 32 --micro-batch 1"
  "search|-t dgx-h100-4node -m $tt/llama3.1-8b-seq65536.ini -b 16 --micro-batch 1"
  "search|-t dgx-h100-32node -m llama3-70b -b 256 --micro-batch 1"
  "search|-t dgx-h100-32node -m \$tmp/llama3-70b-seq65536.ini -b 32 --micro-batch 1"
  "search|-t bench/topologies/dgx-h100-128node.ini -m llama3-70b -b 1024"
  "sweep|-t tpu-v3-8x8 -m bert-large -b 512 --splits auto"
  "sweep|-t tpu-v3-8x8 -m gpt3-13b -b 64 --micro-batch 1 --splits auto"
  "sweep|-t dgx-a100-1node -m gpt3-350m -b 64 --splits auto --vary-options --max-configs 200"
  "sweep|-t tpu-v3-pod -m gpt3-175b -b 1536 --splits auto"
)
echo "| command | configurations | fsdp2 | cp | cpu_s |"
echo "|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r cmd args <<< "$c"
  # BENCH_ONLY=REGEX: only the cases whose arguments match (e.g. BENCH_ONLY=70b).
  [[ -z "${BENCH_ONLY:-}" || "$args" =~ $BENCH_ONLY ]] || continue
  rm -rf "$tmp/o"
  # search -o writes every candidate (candidates.json), a sweep every row (sweep.json).
  eval "/usr/bin/time -f '%U %S' -o \"$tmp/time\" \"$bin\" $cmd $args --jobs 1 -o \"$tmp/o\"" \
    >/dev/null 2>"$tmp/err" || { echo "$cmd $args: failed: $(tail -n 1 "$tmp/err")" >&2; exit 2; }
  read -r user sys < "$tmp/time"
  # Every configuration, replayed or not (results and skipped of candidates.json / sweep.json).
  json="$tmp/o/candidates.json"
  [ "$cmd" = sweep ] && json="$tmp/o/sweep.json"
  grep -o '"split_arg" : "[^"]*"' "$json" > "$tmp/splits" || true
  n=$(wc -l < "$tmp/splits")
  fsdp2=$(grep -c 'fsdp2' "$tmp/splits" || true)
  cp=$(grep -c '[",]cp=' "$tmp/splits" || true)
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
  echo "| \`$cmd $args\` | $n | $fsdp2 | $cp | $cpu |"
done
