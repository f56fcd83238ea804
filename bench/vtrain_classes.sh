#!/bin/sh
# vtrain_classes.sh: where vTrain's single-node error sits. Replays
# data/published/vtrain/megatron-single.csv (`trainsim validate --against --format csv`) and
# groups the rows' signed errors by shape class: tensor-parallel degree, micro-batch and width
# (what sets each GPU's GEMM, softmax and all-reduce sizes; pp, dp, layers and the number of
# micro-batches only repeat a class's layer), and prints per class the rows, the mean signed
# error and its spread, the mean |error| (all rows and the held-out half: the `set` column of
# data/published/vtrain/trainsim/a100.csv, seed 20261201) and the class's share of the file's
# summed |error|, largest share first (docs/accuracy.md, "vTrain, single node": "Which shape
# classes carry the error").
#
#   bench/vtrain_classes.sh            # classes by tp, micro-batch, width
#   bench/vtrain_classes.sh tp         # by tp only (also: tp,h  tp,mb  mb,h  pp  dp)
#
# A class whose spread is small and whose mean is far from 0 is a structural miss of the model
# (every row of the class off the same way); a large spread is the rows' own scatter.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
by=${1:-tp,mb,h}
case "$by" in
*[!a-z,]* | "") echo "vtrain_classes.sh: argument 1: expected keys from tp, pp, dp, mb, h joined by commas, got '$by'" >&2; exit 2 ;;
esac
bench_build
bench_tmp
bench_validate "$tmp/rows.csv" --against data/published/vtrain/megatron-single.csv --format csv -j 2
awk -v by="$by" "$(cat bench/csv_fields.awk)"'
  function deg(s, ax) {
    if (match(s, "(^|,)" ax "=[0-9]+")) { s = substr(s, RSTART, RLENGTH); sub(/.*=/, "", s); return s + 0 }
    return 1
  }
  BEGIN { nk = split(by, keys, ",") }
  # a100.csv: the fitting / held-out set of each ground_truth_single.csv line.
  FNR == NR {
    if ($0 ~ /^#/ || $0 ~ /^topology,/) next
    n = fields($0, f); split(f[n], s, ":")
    if (s[1] == "ground_truth_single.csv") set[s[2]] = f[n - 1]
    next
  }
  FNR == 1 { next }
  {
    fields($0, f)
    model = f[5]; spl = f[6]
    v["h"] = model; sub(/.*-h/, "", v["h"]); sub(/-.*/, "", v["h"])
    v["tp"] = deg(spl, "tp"); v["pp"] = deg(spl, "pp"); v["dp"] = deg(spl, "dp"); v["mb"] = f[8]
    g = ""
    for (i = 1; i <= nk; i++) {
      if (!(keys[i] in v)) { print "vtrain_classes.sh: unknown key " keys[i] " (expected tp, pp, dp, mb, h)" > "/dev/stderr"; bad = 1; exit 2 }
      g = g (i > 1 ? " " : "") sprintf("%-5s", v[keys[i]])
    }
    e = f[13] + 0; a = e < 0 ? -e : e
    if (!(g in cnt)) order[++ng] = g
    cnt[g]++; se[g] += e; se2[g] += e * e; sa[g] += a; tot += a; nall++; rg[nall] = g; re[nall] = e
    if (set[f[1]] == "heldout") { nh[g]++; sh[g] += a }
  }
  END {
    if (bad) exit 2
    hdr = ""
    for (i = 1; i <= nk; i++) hdr = hdr (i > 1 ? " " : "") sprintf("%-5s", keys[i])
    printf "%s | rows | bias   spread | mean |error|  held out | share of |error|\n", hdr
    for (q = 1; q <= ng; q++) {
      g = order[q]; m = se[g] / cnt[g]; sd = se2[g] / cnt[g] - m * m
      held = nh[g] ? sprintf("%6.1f%%", sh[g] / nh[g]) : "      -"
      printf "%s | %4d | %+5.1f%%  %5.1f%% | %6.1f%%      %s | %5.1f%%\n", g, cnt[g], m, sqrt(sd > 0 ? sd : 0),
        sa[g] / cnt[g], held, 100 * sa[g] / tot | "sort -t\"|\" -k5,5nr"
    }
    close("sort -t\"|\" -k5,5nr")
    # What a model exact on every class mean would leave: each row less its class bias.
    for (r = 1; r <= nall; r++) { d = re[r] - se[rg[r]] / cnt[rg[r]]; rest += d < 0 ? -d : d }
    printf "all %d rows: mean |error| %.2f%%; %.2f%% with each class'"'"'s bias taken out\n", nall, tot / nall, rest / nall
  }' data/published/vtrain/trainsim/a100.csv "$tmp/rows.csv"
