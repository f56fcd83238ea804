#!/bin/sh
# a100_breakdown.sh: where trainsim puts the time of every multi-node A100 row (docs/accuracy.md,
# "Multi-node A100 runs: one mechanism or several"). Each row of the files below is replayed with
# `trainsim sweep` (one configuration: the row's topology, its `vary` as --vary, split, batch,
# micro-batch and bucket), and its step is printed split into compute, pipeline bubble and the
# exposed data-, tensor- and pipeline-parallel time, beside the measured step; comm is all the
# communication of the busiest chip, hidden or not (so a row's step could grow by at most
# comm - dp - tp - pp if nothing overlapped). The last column,
# per-mb, is (measured - exposed) / (predicted - exposed): how much slower the measured run's
# compute and bubble were than trainsim's, with the exposed communication taken as predicted.
#
#   bench/a100_breakdown.sh                      # the held-out multi-node files and the references
#   bench/a100_breakdown.sh mtnlg/smith2022-mtnlg # one file (data/published/DIR/NAME, no .csv)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
files=${*:-"mtnlg/smith2022-mtnlg opt/zhang2022-opt175b gpt-neox/black2022-neox20b
bloom/bigscience2022-bloom nemo-launcher/nemo-launcher-5b-a100 torchtitan/performance_a100_steps
megatron/narayanan2021-table1 megatron/korthikanti2022-table4"}
# A name that is not a measurement file stops the script before anything is built or printed.
for f in $files; do
  [ -f "data/published/$f.csv" ] || {
    echo "a100_breakdown.sh: argument '$f': expected a measurement file data/published/DIR/NAME (without .csv)" >&2
    exit 2
  }
done
bench_build
bench_tmp
printf "%-24s %4s %5s %8s %8s %7s %8s %7s %6s %6s %6s %7s %6s\n" file line gpus measured predicted \
  error compute bubble dp tp pp comm per-mb
for f in $files; do
  csv="data/published/$f.csv"
  dir=$(dirname "$csv")
  # One line per row: the sweep's arguments, separated by |, then the measured step and line.
  awk "$(cat bench/csv_fields.awk)"'
    /^#/ || /^[ \t]*$/ { next }
    !h { n = fields($0, H); for (i = 1; i <= n; i++) c[H[i]] = i; h = 1; next }
    {
      fields($0, x)
      m = x[c["model"]]; if (m ~ /\//) m = dir "/" m
      t = ("topology" in c) ? x[c["topology"]] : x[c["machine"]]
      v = ("vary" in c) ? x[c["vary"]] : ""
      bk = ("bucket_MiB" in c) ? x[c["bucket_MiB"]] : ""
      st = ("step_time_s" in c) ? x[c["step_time_s"]] : x[c["step_time_ms"]] / 1000
      printf "%s|%s|%s|%s|%s|%s|%s|%s|%d\n", t, m, x[c["split"]], x[c["global_batch"]],
        x[c["micro_batch"]], bk, v, st, NR
    }' dir="$dir" "$csv" >"$tmp/rows.txt"
  while IFS="|" read -r t m s b mb bk v st line; do
    set -- -t "$t" -m "$m" -b "$b" --micro-batch "$mb" -s "$s" --jobs 1 -f csv
    [ -n "$bk" ] && set -- "$@" --bucket-MiB "$bk"
    if [ -n "$v" ]; then
      old=$IFS
      IFS=';'
      for kv in $v; do set -- "$@" --vary "$kv"; done
      IFS=$old
    fi
    "$ts" sweep "$@" >"$tmp/one.csv" 2>"$tmp/one.err" || {
      echo "a100_breakdown.sh: $csv line $line: $(tail -n 1 "$tmp/one.err")" >&2
      exit 2
    }
    awk -v name="$(basename "$f")" -v line="$line" -v meas="$st" "$(cat bench/csv_fields.awk)"'
      NR == 1 { n = fields($0, H); for (i = 1; i <= n; i++) c[H[i]] = i; next }
      {
        fields($0, x)
        p = x[c["step_time_s"]]; e = x[c["exposed_comm_time_s"]]
        printf "%-24s %4d %5d %8.3f %8.3f %+6.1f%% %8.3f %7.3f %6.3f %6.3f %6.3f %7.3f %6.3f\n",
          substr(name, 1, 24), line, x[c["chips"]], meas, p, 100 * (p / meas - 1),
          x[c["compute_time_s"]], x[c["bubble_time_s"]], x[c["exposed_comm_dp_s"]],
          x[c["exposed_comm_tp_s"]], x[c["exposed_comm_pp_s"]], x[c["comm_time_s"]],
          (meas - e) / (p - e)
      }' "$tmp/one.csv"
  done <"$tmp/rows.txt"
done
