#!/bin/sh
# Speed of capacity planning beyond the step (issue 14): closed-form time to train of one split
# and Monte Carlo over failure times; then `run --tokens` against the same run without, on the
# command line. Usage: bench/bench_planning.sh [BUILD_DIR]. Results: bench/RESULTS.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
exe=$(mktemp /tmp/bench_planning.XXXXXX)
trap 'rm -f "$exe"' EXIT
gcc -O2 -o "$exe" "$here/bench_planning.c" -I"$here/../sim" \
  $(pkg-config --cflags glib-2.0 json-glib-1.0 simgrid) "$build/sim/libtrainsim_lib.a" \
  $(pkg-config --libs glib-2.0 json-glib-1.0 simgrid) -lstdc++ -lm
"$exe"
ts="$build/sim/trainsim"
for extra in "" "--tokens 15e12 --restart-minutes 10"; do
  start=$(date +%s.%N)
  "$ts" run -t dgx-h100-32node -m megatron-gpt-76b -b 2048 --micro-batch 1 \
    -s tp=8@node,pp=8,dp=4,schedule=1f1b,recompute=full $extra >/dev/null
  end=$(date +%s.%N)
  echo "run ${extra:-(step only)}: wall_s $(echo "$end - $start" | bc)"
done
