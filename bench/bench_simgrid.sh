#!/usr/bin/env bash
# Times the simgrid backend: a 1 GB all-reduce with the 2D-torus algorithm on 32x32 and 64x64
# pods (every chip, bidirectional rings), and the data-parallel ResNet-50 step through
# `trainsim run --backend simgrid`: wall time, peak RSS (/usr/bin/time), flows and flows/s,
# platform build time, simulated time against the analytic backend. Median of REPEAT runs
# (default 3). Wall times on the shared 2-core VM vary by +-40 % and more when other jobs run,
# so CPU time (user + system) is reported too.
# Usage: bench/bench_simgrid.sh [build dir] [repeat]    (prints Markdown tables)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
repeat=${2:-3}
bin=$build/sim/trainsim
exe=$(mktemp -d)/bench_simgrid
# Built here rather than by CMake: a benchmark, not part of the product.
# One static library per layer of sim/, listed top down so each finds the ones below it.
incs=$(find "$here/../sim" -mindepth 1 -type d -printf '-I%p ')
libs=""
for l in cmd plot run validate report backend_analytic backend_simgrid plan replay trace coll model core; do
  libs="$libs $build/sim/libts_$l.a"
done
# shellcheck disable=SC2086
gcc -O2 -o "$exe" "$here/bench_simgrid.c" $incs \
  $(pkg-config --cflags glib-2.0 json-glib-1.0 simgrid) $libs \
  $(pkg-config --libs glib-2.0 json-glib-1.0 simgrid) -lstdc++ -lm

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

echo "| array | chips | flows | platform_s | replay_wall_s | process_cpu_s | peak_RSS_MB | flows_per_s (wall) | simulated_s | analytic_s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for topo in tpu-v3-pod "$here/topologies/tpu-v3-64x64.ini"; do
  walls=(); cpus=(); rss=(); plat=(); line=""
  for ((i = 0; i < repeat; i++)); do
    out=$(/usr/bin/time -f "rss_kb=%M cpu_s=%U+%S" "$exe" "$topo" x,y torus 1e9 2>&1)
    line=$(echo "$out" | grep chips=)
    walls+=("$(echo "$line" | field replay_s)")
    plat+=("$(echo "$line" | field platform_s)")
    rss+=("$(echo "$out" | field rss_kb)")
    cpus+=("$(echo "$out" | field cpu_s | awk -F+ '{ printf "%.2f", $1 + $2 }')")
  done
  w=$(printf '%s\n' "${walls[@]}" | median)
  c=$(printf '%s\n' "${cpus[@]}" | median)
  p=$(printf '%s\n' "${plat[@]}" | median)
  r=$(printf '%s\n' "${rss[@]}" | median)
  flows=$(echo "$line" | field flows)
  echo "| $(basename "$topo" .ini) | $(echo "$line" | field chips) | $flows | $p | $w | $c |" \
       "$((r / 1024)) | $(awk -v f="$flows" -v w="$w" 'BEGIN { printf "%.0f", f / w }') |" \
       "$(echo "$line" | field simulated_s) | $(echo "$line" | field analytic_s) |"
done

echo
echo "| model | array | split | backend | step_time_s | wall_s | cpu_s | peak_RSS_MB |"
echo "|---|---|---|---|---|---|---|---|"
for entry in "tpu-v3-pod:1024" "$here/topologies/tpu-v3-64x64.ini:4096"; do
  topo=${entry%%:*}; n=${entry##*:}
  for backend in analytic simgrid; do
    walls=(); cpus=(); rss=(); step=""
    for ((i = 0; i < repeat; i++)); do
      t0=$(date +%s.%N)
      out=$(/usr/bin/time -f "rss_kb=%M cpu_s=%U+%S" "$bin" run -t "$topo" -m resnet50 \
        -s "dp=$n" -b $((n * 32)) --micro-batch 32 --backend $backend --format json 2>&1)
      t1=$(date +%s.%N)
      walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
      rss+=("$(echo "$out" | field rss_kb)")
      cpus+=("$(echo "$out" | field cpu_s | awk -F+ '{ printf "%.2f", $1 + $2 }')")
      step=$(echo "$out" | grep -m1 '"step_time_s"' | sed 's/.*: *//; s/,$//')
    done
    w=$(printf '%s\n' "${walls[@]}" | median)
    c=$(printf '%s\n' "${cpus[@]}" | median)
    r=$(printf '%s\n' "${rss[@]}" | median)
    echo "| resnet50 | $(basename "$topo" .ini) | dp=$n | $backend | $step | $w | $c | $((r / 1024)) |"
  done
done
rm -rf "$(dirname "$exe")"
