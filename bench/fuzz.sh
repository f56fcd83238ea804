#!/usr/bin/env bash
# Runs every libFuzzer harness (tests/fuzz/fuzz_*.c) for a given time each, with ASan and
# UBSan and a 1 GB allocation limit (issue 12's targets), seeded from the shipped files. The
# 1 s per-input target is checked in CPU time: libFuzzer's -timeout is wall-clock time, which
# a loaded shared machine stretches past 1 s for inputs that take 0.1 s (niced, load 15), so
# the fuzzer's own timeout is TS_FUZZ_TIMEOUT (default 10 s: a hang still stops it) and the
# final corpus is replayed through the sanitized plain program (fuzz_<reader>_replay), which
# prints its slowest input in CPU seconds. A crash is left in bench/fuzz-out/<reader>/ as crash-*: minimise it,
# add it to tests/fuzz/regressions/<reader>/ (ctest then replays it), and fix the reader.
# Usage: bench/fuzz.sh [SECONDS_PER_HARNESS (default 60)] [READER...]
# Prints one line per harness: executions, corpus size, result; bench/RESULTS.md records them.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
cmake -S . -B build-fuzz -DTS_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ > /dev/null
readers=("$@")
if [ ${#readers[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do r=$(basename "$f" .c); readers+=("${r#fuzz_}"); done
fi
targets=(); for r in "${readers[@]}"; do targets+=("fuzz_$r" "fuzz_${r}_replay"); done
cmake --build build-fuzz -j2 --target "${targets[@]}" > /dev/null || { echo "fuzz: build failed" >&2; exit 1; }
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=64 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for r in "${readers[@]}"; do
  out=bench/fuzz-out/$r
  mkdir -p "$out/corpus"
  # Seeds: the shipped files each reader reads (as tests/fuzz/CMakeLists.txt's corpus tests).
  case $r in
    topology) cp topologies/*.ini topologies/chips/*.ini "$out/corpus/" ;;
    model) cp models/*.ini "$out/corpus/" ;;
    trace) cp traces/handwritten/*.trace traces/examples/*.trace "$out/corpus/" ;;
    scenario) cp tests/scenarios/*.ini "$out/corpus/" ;;
    measurements) find data/published -name '*.csv' -exec cp {} "$out/corpus/" \; ;;
    astrasim) for f in traces/imported/astrasim/*.txt; do
        [ "$(basename "$f")" = PROVENANCE.txt ] || cp "$f" "$out/corpus/"; done ;;
    chakra) find traces/imported/chakra -name '*.et' -o -name '*.json' |
        while read -r f; do cp "$f" "$out/corpus/$(basename "$(dirname "$f")")-$(basename "$f")"; done ;;
  esac
  [ -d "tests/fuzz/seeds/$r" ] && cp "tests/fuzz/seeds/$r"/* "$out/corpus/"
  [ -d "tests/fuzz/regressions/$r" ] && cp "tests/fuzz/regressions/$r"/* "$out/corpus/" 2>/dev/null
  log=$out/fuzz.log
  (cd "$out" && "../../../build-fuzz/tests/fuzz/fuzz_$r" corpus -max_total_time="$secs" \
      -timeout="${TS_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
      > fuzz.log 2>&1)
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  wall=$(grep -o 'stat::slowest_unit_time_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  crashes=$(ls "$out"/crash-* "$out"/timeout-* "$out"/oom-* 2>/dev/null | wc -l)
  result=clean; [ $rc -ne 0 ] && { result="FAILED (exit $rc, $crashes artifacts; see $log)"; status=1; }
  # The slowest input of the final corpus, in CPU time, under the same sanitizers.
  cpu=$("build-fuzz/tests/fuzz/fuzz_${r}_replay" "$out/corpus" 2>/dev/null |
    sed -n 's/.*slowest \([0-9.]*\) s CPU.*/\1/p')
  printf '%-12s %4ss  %10s execs  %7s/s  corpus %5s files  slowest %s s wall, %s s CPU  %s\n' \
    "$r" "$secs" "${execs:-?}" "${rate:-?}" "$(ls "$out/corpus" | wc -l)" "${wall:-?}" \
    "${cpu:-?}" "$result"
done
exit $status
