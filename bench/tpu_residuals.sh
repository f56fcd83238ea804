#!/bin/sh
# tpu_residuals.sh: the residual analysis of a TPU step-time file (default MaxText's single-slice
# rows, data/published/maxtext/maxtext-tpu.csv; docs/accuracy.md, "MaxText on TPU"): every row
# with what describes its run (chip, model, chips, tp, dp, recomputation, samples and tokens
# per chip, set) and where its predicted step goes (compute, exposed communication, memory per
# chip against the capacity), then the mean |error| and bias grouped by each of those, so a
# mechanism can be looked for in the rows that share an error rather than in single rows.
#
#   nice bench/tpu_residuals.sh                                     # about 10 s
#   nice bench/tpu_residuals.sh data/published/maxtext/multislice.csv
#
# Each row is replayed by `trainsim sweep` with the row's topology, what-ifs, model, batch and
# split (the same prediction `trainsim validate --against` makes). Fields of the row table:
# compute_pct and exposed_comm_pct are shares of the predicted step; memory_pct is the
# predicted memory per chip over the capacity less the runtime reserve (over 100: the run does
# not fit as written); the "needed" efficiency is the chip's compute_efficiency scaled by
# predicted / measured step, what one row alone would ask of it (compute-bound rows).
set -eu
export LC_ALL=C   # the grouped table is sorted: the same order everywhere
cd "$(dirname "$0")/.."
. bench/lib.sh
csv=${1:-data/published/maxtext/maxtext-tpu.csv}
[ -f "$csv" ] && [ -r "$csv" ] || { echo "tpu_residuals.sh: $csv: expected a readable measurement file (CSV)" >&2; exit 2; }
dir=$(dirname "$csv")
bench_build
bench_tmp
# unquote: a CSV line with its quoted commas as ';' (splits hold commas); the quotes are then
# dropped and the line split on ','.
unq='function unquote(l,   o, q, i, c) { q = 0; o = ""
  for (i = 1; i <= length(l); i++) { c = substr(l, i, 1)
    if (c == "\"") q = !q; else if (q && c == ",") c = ";"; o = o c }
  return o }'
# The file's rows, '|'-separated (an empty field stays a field): line group topology vary model
# split batch micro measured set ("-" when the file has no set column)
awk "$unq"'
  /^#/ { next }
  /^group,/ { n = split($0, h, ","); for (i = 1; i <= n; i++) col[h[i]] = i; next }
  !("step_time_s" in col) { next }
  { l = unquote($0); gsub(/"/, "", l); n = split(l, f, ",")
    s = ("set" in col) ? f[col["set"]] : "-"
    printf "%d|%s|%s|%s|%s|%s|%s|%s|%s|%s\n", NR, f[col["group"]], f[col["topology"]],
      f[col["vary"]], f[col["model"]], f[col["split"]], f[col["global_batch"]],
      f[col["micro_batch"]], f[col["step_time_s"]], s }' "$csv" > "$tmp/rows"
[ -s "$tmp/rows" ] || { echo "tpu_residuals.sh: $csv: no step_time_s rows" >&2; exit 2; }
: > "$tmp/out"
while IFS='|' read -r line group topo vary model split batch micro meas set; do
  t=$topo
  case $t in *.ini) [ -r "$t" ] || t=$dir/$t ;; esac
  set -- -t "$t" -m "$model" -b "$batch" --micro-batch "$micro" --splits "$(echo "$split" | tr ';' ',')"
  if [ -n "$vary" ]; then
    for v in $(echo "$vary" | tr ';' ' '); do set -- "$@" --vary "$v"; done
  fi
  rm -rf "$tmp/s"
  ./build/sim/trainsim sweep -j 1 "$@" -o "$tmp/s" >/dev/null 2>&1
  tf=$t
  case $tf in *.ini) ;; *) tf=topologies/$tf.ini ;; esac
  seq=$(awk -F'=' '/^[ \t]*sequence[ \t]*=/ { gsub(/[ \t]/, "", $2); sub(/#.*/, "", $2); print $2; exit }' \
    "models/$model.ini" 2>/dev/null || true)
  eff=$(awk -F'=' '/^[ \t]*compute_efficiency[ \t]*=/ { sub(/#.*/, "", $2); gsub(/[ \t]/, "", $2); v = $2 } END { print v }' \
    "topologies/chips/$(awk -F'=' '/^[ \t]*profile[ \t]*=/ { sub(/#.*/, "", $2); gsub(/[ \t]/, "", $2); print $2; exit }' "$tf" 2>/dev/null || echo none).ini" 2>/dev/null || true)
  awk -v line="$line" -v group="$group" -v model="$model" -v spl="$split" \
    -v meas="$meas" -v set="$set" -v seq="${seq:-0}" -v eff="${eff:-0}" "$unq"'
    NR == 1 { n = split($0, h, ","); for (i = 1; i <= n; i++) col[h[i]] = i; next }
    { l = unquote($0); gsub(/"/, "", l); split(l, f, ",")
      p = f[col["step_time_s"]]; chips = f[col["chips"]]; gb = f[col["global_batch"]]
      tp = 1; dp = 1; rc = "none"; m = split(spl, it, ";")
      for (i = 1; i <= m; i++) { if (it[i] ~ /^tp=/) tp = substr(it[i], 4) + 0
        if (it[i] ~ /^dp=/) dp = substr(it[i], 4) + 0
        if (it[i] ~ /^recompute=/) rc = substr(it[i], 11) }
      cap = f[col["memory_capacity_bytes"]] - f[col["memory_reserve_bytes"]]
      printf "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%.3g\t%d\t%.1f\t%.1f\t%.0f\t%.3f\t%.3f\t%+.1f\n",
        line, set, group, model, chips, tp, dp, rc, gb / chips, gb / chips * seq,
        100 * f[col["compute_time_s"]] / p, 100 * f[col["exposed_comm_time_s"]] / p,
        100 * f[col["memory_per_chip_bytes"]] / cap, eff, eff * p / meas, 100 * (p / meas - 1) }' \
    "$tmp/s/sweep.csv" >> "$tmp/out"
done < "$tmp/rows"
printf '%s\n' "# $csv: predicted step against measured, per row (bench/tpu_residuals.sh)"
awk -F'\t' 'BEGIN { printf "%-5s %-8s %-30s %-14s %6s %4s %5s %-18s %7s %8s %8s %8s %7s %5s %7s %7s\n",
    "line", "set", "group", "model", "chips", "tp", "dp", "recompute", "smp/chp", "tok/chip",
    "compute%", "exp.comm%", "memory%", "eff", "needed", "error%" }
  { printf "%-5s %-8s %-30s %-14s %6d %4d %5d %-18s %7s %8d %8s %8s %7s %5s %7s %7s\n",
    $1, $2, substr($3, 1, 30), $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 }' "$tmp/out"
# Grouped: mean |error| and bias by each description; a group of one row is left out.
awk -F'\t' '
  function add(k, e) { n[k]++; s[k] += (e < 0 ? -e : e); b[k] += e }
  { e = $16 + 0; c = $3
    add("chip " c, e); add("set " $2, e); add("recompute " $8, e)
    add(($6 > 1 ? "tp > 1" : "tp = 1 (FSDP only)"), e)
    add(sprintf("tokens/chip %s", $10 < 8192 ? "< 8k" : ($10 < 16384 ? "8k-16k" : ">= 16k")), e)
    add(sprintf("memory %s", $13 < 80 ? "< 80%" : ($13 <= 100 ? "80-100%" : "> 100% (does not fit)")), e)
    add("all", e) }
  END { printf "\n%-34s %5s %14s %10s\n", "group of rows", "rows", "mean |error|", "bias"
    for (k in n) if (n[k] >= 2)
      printf "%-34s %5d %13.1f%% %+9.1f%%\n", k, n[k], s[k] / n[k], b[k] / n[k] | "sort" }' "$tmp/out"
