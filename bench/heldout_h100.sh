#!/bin/sh
# heldout_h100.sh: the held-out error of every H100 / H200 step-time file and of TorchTitan's
# A100 file at the shipped profiles, one line a file, then pooled: the criterion for a change to
# the H100 kind's fit (bench/fit_h100.sh) or to a stack mechanism that moves its fit rows
# (docs/accuracy.md, "TorchTitan, step time on A100", the copies around FSDP2's collectives).
# A row is held out unless its group says "(fit)" (the H100 fit's rows A and B).
#
#   bench/heldout_h100.sh        # ~40 s: twelve validate runs
#
# Pooled three ways: over every held-out row (MosaicML's mpt-h100.csv is 70 of the 128), over
# the twelve files' means (each file one vote), and over the rows without mpt-h100.csv.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_build
bench_tmp
for file in $(h100_step_files) data/published/torchtitan/performance_a100_steps.csv; do
  # (validate's progress lines go to stderr; a refused file stops here with validate's line)
  ./build/sim/trainsim validate --against "$file" --format json > "$tmp/v.json" 2> "$tmp/err" || {
    grep -v '^validate: [0-9]' "$tmp/err" >&2
    exit 2
  }
  awk -F'"' -v f="$(basename "$file")" '
    /^    {/ { g = "" }
    $2 == "group" && g == "" { g = $4 }
    $2 == "error_pct" && g !~ /\(fit\)/ { sub(/^ *: */, "", $3); sub(/,$/, "", $3); print f "\t" $3 + 0 }' \
    "$tmp/v.json"
done > "$tmp/rows.tsv"
awk -F'\t' '
  { a = $2 < 0 ? -$2 : $2; n[$1]++; s[$1] += a; b[$1] += $2; if (a > m[$1]) m[$1] = a
    if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 }
    S += a; N++; if ($1 != "mpt-h100.csv") { S2 += a; N2++ } }
  END {
    printf "%-36s %5s %13s %10s %8s\n", "file (held-out rows)", "rows", "mean |error|", "bias", "worst"
    for (i = 1; i <= k; i++) {
      f = order[i]; F += s[f] / n[f]
      printf "%-36s %5d %12.2f%% %+9.2f%% %7.2f%%\n", f, n[f], s[f] / n[f], b[f] / n[f], m[f]
    }
    printf "pooled over rows: %.2f%% (%d rows); over files: %.2f%% (%d files); rows without mpt-h100.csv: %.2f%% (%d rows)\n",
      S / N, N, F / k, k, S2 / N2, N2
  }' "$tmp/rows.tsv"
