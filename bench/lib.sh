# bench/lib.sh: the preamble the bench scripts share. Source it from the repository root, after
# `cd "$(dirname "$0")/.."`: it sets root (that folder) and ts (the trainsim program built there)
# and defines
#   bench_build [TARGET...]  configure build/ and build TARGETs (default trainsim), quietly: the
#                            script then runs on a fresh checkout too
#   bench_tmp                a fresh folder in $tmp, removed when the script exits
#   h100_step_files          the H100/H200 step-time measurement files, one per word
root=$(pwd)
ts="$root/build/sim/trainsim"

bench_build() {
  [ $# -gt 0 ] || set -- trainsim
  cmake -S . -B build >/dev/null
  cmake --build build -j2 --target "$@" >/dev/null
}

bench_tmp() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

# bench_validate OUT ARG...: `trainsim validate ARG...` into OUT (after bench_tmp). Its progress
# lines are dropped; when it fails, its error line is printed and the script stops (exit 2), where
# `2>/dev/null` ended it with no word or, in a pipe, went on with an empty table.
bench_validate() {
  out=$1
  shift
  if ! "$ts" validate "$@" >"$out" 2>"$tmp/validate.err"; then
    echo "$(basename "$0"): $(tail -n 1 "$tmp/validate.err")" >&2
    exit 2
  fi
}

# h100_step_files: every shipped H100 / H200 step-time file (bench/heldout_h100.sh,
# bench/h100_bias.sh), in the order their tables list them.
h100_step_files() {
  pub=data/published
  tt=$pub/torchtitan
  echo "$tt/llama3_h100_steps.csv $tt/llama3_405b_h100_202408_steps.csv" \
    "$tt/llama3_h100_asynctp_steps.csv $tt/llama3_h100_cp_steps.csv" \
    "$tt/llama3_8b_h200_202506_steps.csv $pub/nemo/nemo-24.07-h100-fp8.csv" \
    "$pub/megatron-bridge/nemo-h100-fp8.csv $pub/megatron-bridge/nemo-h100-moe.csv" \
    "$pub/megatron-core/mcore-h100-weak-scaling.csv $pub/llama3/grattafiori2024-table4.csv" \
    "$pub/llm-foundry/mpt-h100.csv"
}
