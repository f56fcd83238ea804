#!/bin/sh
# mpt_residuals.sh: where the MPT (LLM Foundry) error sits. Replays one measurement file of
# data/published/llm-foundry (`trainsim validate --against --format csv`) and groups the rows'
# signed errors by a key of the row: model size, sequence length, GPUs, micro-batch, activation
# checkpointing (rc: recompute=full, no: none), gradient-accumulation steps (ga1: one micro-batch
# a step, ga>1: more) or attention kernel (triton: attn-kernel=triton; fa2: the default).
# Prints per class the rows, the mean signed error, its spread and the mean |error|, in the
# key's order (docs/accuracy.md, "MosaicML LLM Foundry": "Residuals by row class").
#
#   bench/mpt_residuals.sh a100-80gb seq       # file mpt-a100-80gb.csv by sequence length
#   bench/mpt_residuals.sh h100 rc,ga          # mpt-h100.csv by checkpointing and accumulation
#
# Keys: size, seq, gpus, mb, rc, ga, attn, joined by commas. A class whose spread is small and
# whose mean is far from 0 is a structural miss (every row of the class off the same way).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
file=${1:-}
by=${2:-seq}
case "$file" in
a100-80gb | a100-40gb | h100) ;;
*) echo "mpt_residuals.sh: argument 1: expected a100-80gb, a100-40gb or h100, got '$file'" >&2; exit 2 ;;
esac
case "$by" in
*[!a-z,]* | "") echo "mpt_residuals.sh: argument 2: expected keys from size, seq, gpus, mb, rc, ga, attn joined by commas, got '$by'" >&2; exit 2 ;;
esac
bench_build
bench_tmp
bench_validate "$tmp/rows.csv" --against "data/published/llm-foundry/mpt-$file.csv" --format csv -j 2
awk -v by="$by" "$(cat bench/csv_fields.awk)"'
  function deg(s, ax) {
    if (match(s, "(^|,)" ax "=[0-9]+")) { s = substr(s, RSTART, RLENGTH); sub(/.*=/, "", s); return s + 0 }
    return 1
  }
  # A size in parameters for ordering: 125m -> 0.125, 7b -> 7.
  function billions(s) { return s ~ /m$/ ? substr(s, 1, length(s) - 1) / 1000 : substr(s, 1, length(s) - 1) + 0 }
  BEGIN { nk = split(by, keys, ",") }
  FNR == 1 { next }
  {
    fields($0, f)
    model = f[5]; spl = f[6]
    v["size"] = model; sub(/.*mpt-/, "", v["size"]); sub(/-seq.*/, "", v["size"])
    v["seq"] = model; sub(/.*-seq/, "", v["seq"]); sub(/\.ini$/, "", v["seq"])
    v["gpus"] = deg(spl, "dp"); v["mb"] = f[8]
    v["rc"] = spl ~ /recompute=full/ ? "rc" : "no"
    v["ga"] = f[7] / (v["gpus"] * f[8]) == 1 ? "ga1" : "ga>1"
    v["attn"] = spl ~ /attn-kernel=triton/ ? "triton" : "fa2"
    g = ""; o = ""
    for (i = 1; i <= nk; i++) {
      if (!(keys[i] in v)) { print "mpt_residuals.sh: unknown key " keys[i] " (expected size, seq, gpus, mb, rc, ga, attn)" > "/dev/stderr"; bad = 1; exit 2 }
      g = g (i > 1 ? " " : "") sprintf("%-6s", v[keys[i]])
      x = keys[i] == "size" ? billions(v["size"]) : v[keys[i]]
      o = o sprintf(x ~ /^[0-9.]+$/ ? "%012.4f " : "%-12s ", x)
    }
    e = f[13] + 0; a = e < 0 ? -e : e
    if (!(g in cnt)) { ng++; cls[ng] = g; ord[ng] = o }
    cnt[g]++; se[g] += e; se2[g] += e * e; sa[g] += a
  }
  END {
    if (bad) exit 2
    # insertion sort of the classes by their key order
    for (i = 2; i <= ng; i++)
      for (j = i; j > 1 && ord[j] < ord[j - 1]; j--) {
        t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t
        t = cls[j]; cls[j] = cls[j - 1]; cls[j - 1] = t
      }
    hdr = ""
    for (i = 1; i <= nk; i++) hdr = hdr (i > 1 ? " " : "") sprintf("%-6s", keys[i])
    printf "%s  rows  mean error  spread  mean |error|\n", hdr
    for (i = 1; i <= ng; i++) {
      g = cls[i]; n = cnt[g]; m = se[g] / n; var = se2[g] / n - m * m
      printf "%s  %4d  %+9.1f%%  %5.1f%%  %11.1f%%\n", g, n, m, sqrt(var > 0 ? var : 0), sa[g] / n
    }
  }' "$tmp/rows.csv"
