#!/usr/bin/env bash
# Regenerates every trace trainsim writes under traces/ and the step times they replay to
# (traces/expected-step-times.tsv), after a planner, backend or importer change that moves
# them on purpose. tests/test_import.c then checks the files against today's program; commit
# them with the reason. Usage: traces/regenerate.sh [path/to/trainsim]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./build/sim/trainsim}
t=dgx-a100-1node

# Planner examples (the same commands as traces/README.md and test_import).
"$bin" trace -t $t -m bert-base -s dp=8 -b 64 -o traces/examples/bert-base-dp8.trace
"$bin" trace -t $t -m bert-base -s tp=2,pp=2,dp=2 -b 16 --micro-batch 2 \
  -o traces/examples/bert-base-tp2-pp2-dp2.trace
"$bin" trace -t $t -m gpt3-350m -s dp=8,zero=2,offload=cpu -b 8 \
  -o traces/examples/gpt3-350m-dp8-zero2-offload.trace
"$bin" trace -t $t -m mlp -s dp=8,ps=2,ps-placement=dedicated -b 16 -o traces/examples/mlp-dp8-ps2.trace

# Chakra jobs trainsim exports from two examples (imported/chakra/PROVENANCE.txt).
for n in bert-base-dp8 bert-base-tp2-pp2-dp2; do
  rm -f traces/imported/chakra/$n/*.et
  "$bin" export --to chakra -t $t traces/examples/$n.trace -o traces/imported/chakra/$n --name $n
done

# What the importers write for every shipped sample.
for f in traces/imported/astrasim/*.txt; do
  [ "$(basename "$f")" = PROVENANCE.txt ] && continue
  "$bin" import --from astrasim -t $t "$f" -o "${f%.txt}.trace"
done
for d in traces/imported/chakra/*/; do
  n=$(basename "$d")
  groups=()
  [ -f "$d$n.comm_groups.json" ] && groups=(--comm-groups "$d$n.comm_groups.json")
  "$bin" import --from chakra -t $t "${groups[@]}" "$d"*.et -o "traces/imported/chakra/$n.trace"
done

# The step time of every shipped trace on both backends.
step() { "$bin" replay "$1" -t "$2" --backend "$3" --format json |
  sed -n 's/.*"step_time_s" : \([^,]*\),*/\1/p' | head -1; }
out=traces/expected-step-times.tsv
{
  sed -n '1,3p' "$out"
  grep -v '^#' "$out" | while IFS=$'\t' read -r file topo _ _; do
    printf '%s\t%s\t%s\t%s\n' "$file" "$topo" "$(step "$file" "$topo" analytic)" \
      "$(step "$file" "$topo" simgrid)"
  done
} >"$out.new"
mv "$out.new" "$out"
echo "regenerated traces/ and $out" >&2
