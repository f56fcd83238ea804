#!/usr/bin/env bash
# Proves a change to the replay engine or a backend moved no simulated time: runs the same
# sweeps, searches and full replays with two trainsim programs (say, one built from main and one
# from a branch) and compares every output file byte for byte. Prints one line per case
# (identical / DIFFERENT, and each program's CPU seconds); exits 1 when any case differs.
# Usage: bench/compare_outputs.sh OLD_TRAINSIM NEW_TRAINSIM [--quick]
#   --quick leaves out the two GPT-3 175B every-split sweeps (about 40 CPU s each before issue 15).
set -euo pipefail
old=${1:?usage: compare_outputs.sh OLD_TRAINSIM NEW_TRAINSIM [--quick]}
new=${2:?usage: compare_outputs.sh OLD_TRAINSIM NEW_TRAINSIM [--quick]}
quick=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# name|command (sweep/search cases write into the folder given as -o; run cases print JSON)
cases=(
  "sweep: BERT-Large 8x8, every split x 3 link bandwidths|sweep -t tpu-v3-8x8 -m bert-large -b 512 --splits auto --vary link_bandwidth_GBps=x0.5,x1,x2 --jobs 1 -o @OUT@"
  "sweep: GPT-3 175B pod, data x tensor (micro-batch 1)|sweep -t tpu-v3-pod -m gpt3-175b -b 1024 --micro-batch 1 --splits tp=1;tp=2@x;tp=4@x;tp=8@x;tp=16@x;tp=32@x;tp=2@y;tp=4@y;tp=8@y --jobs 1 -o @OUT@"
  "sweep: GPT-3 350M DGX A100, options varied|sweep -t dgx-a100-1node -m gpt3-350m -b 64 --splits auto --vary-options --max-configs 200 --jobs 1 -o @OUT@"
  "sweep: GPT-3 6.7B asym 16x16, one and two dead links|sweep -t asym-16x16 -m gpt3-6.7b -b 64 -s tp=4@x,dp=64@x+y -s tp=4@x,pp=4@y,dp=16@x+y --vary dead_links=0,1,2 --jobs 1 -o @OUT@"
  "search: GPT-3 6.7B asym 16x16 (docs/whatif.md)|search -t asym-16x16 -m gpt3-6.7b -b 64 --micro-batch 1 --jobs 1 -o @OUT@"
  "run --full: GPT-3 175B tp=8,dp=128 on the pod|run -t tpu-v3-pod -m gpt3-175b -b 1024 --micro-batch 1 -s tp=8,dp=128 --full --format json"
  "run --full: GPT-3 175B tp=8,pp=16,dp=8 1F1B on the pod|run -t tpu-v3-pod -m gpt3-175b -b 1536 -s tp=8@x,pp=16@y,dp=8@x+y --full --format json"
  "run: Llama 3 70B tp=8,pp=4,cp=2 on DGX H100 (timeline)|run -t dgx-h100-32node -m llama3-70b -b 256 -s tp=8,pp=4,cp=2,dp=4 --timeline @OUT@/timeline.json --format json"
)
if [ "$quick" != --quick ]; then
  cases+=(
    "sweep: GPT-3 175B pod, every split|sweep -t tpu-v3-pod -m gpt3-175b -b 1536 --splits auto --jobs 1 -o @OUT@"
    "sweep: GPT-3 175B pod, every split that fits, full recomputation|sweep -t tpu-v3-pod -m gpt3-175b -b 1536 --splits auto --fits-only --recompute full --jobs 1 -o @OUT@"
  )
fi
status=0
for c in "${cases[@]}"; do
  IFS='|' read -r name cmd <<< "$c"
  cpu=()
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    out="$tmp/$side"
    rm -rf "$out"; mkdir -p "$out"
    IFS=' ' read -r -a argv <<< "${cmd//@OUT@/$out/o}"
    [[ "$cmd" == run* ]] && mkdir -p "$out/o"
    /usr/bin/time -f '%U %S' -o "$tmp/time" "$bin" "${argv[@]}" > "$out/stdout" 2> /dev/null || true
    read -r u s < "$tmp/time"
    cpu+=("$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')")
  done
  # The version string and the producer differ between builds: compare everything else.
  same=identical
  if ! diff -r <(cd "$tmp/old" && find . -type f | sort) <(cd "$tmp/new" && find . -type f | sort) > /dev/null; then
    same=DIFFERENT
  else
    while IFS= read -r f; do
      if ! cmp -s <(sed 's/trainsim [0-9][^" ,]*/trainsim V/g' "$tmp/old/$f") \
                  <(sed 's/trainsim [0-9][^" ,]*/trainsim V/g' "$tmp/new/$f"); then
        same="DIFFERENT ($f)"
      fi
    done < <(cd "$tmp/old" && find . -type f | sort)
  fi
  [ "$same" = identical ] || status=1
  echo "| $name | $same | ${cpu[0]} | ${cpu[1]} |"
done
exit $status
