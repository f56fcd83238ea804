#!/bin/sh
# fit_tpuv3.sh: fits ONE compute_efficiency for TPU v3 to the LAMB paper's BERT-Large
# pre-training times on 16 to 1024 TPU v3 chips (data/published/lamb/you2019-lamb-table1.csv,
# PROVENANCE.txt; docs/accuracy.md "BERT-Large on TPU v3") on the rows whose set column is
# "fit", and reports the mean |error| of the fitted and the held-out rows. The value goes into
# topologies/chips/tpu-v3.ini by hand, with the numbers this prints.
#
#   nice -n 19 bench/fit_tpuv3.sh           # the grid 0.20..0.90 (about 30 s on 2 cores)
#   bench/fit_tpuv3.sh --check              # every row at the shipped profile's value, no grid
#
# Each published time mixes BERT's two pre-training phases: the first 9/10 of the epochs at
# sequence 128, the last 1/10 at 512, the batch (sequences) unchanged, so 9/10 and 1/10 of the
# iterations. A row is predicted as 0.9 x step(seq 128) + 0.1 x step(seq 512), each step
# replayed by `trainsim validate` (models data/published/lamb/bert-large-seq128.ini and
# models/bert-large.ini), and compared with the row's mean_step_time_s. Only
# compute_efficiency is fitted, as for the later generations (bench/fit_tpu.sh): the steps are
# matmul-bound (hidden 1024, 4096 and 32 x 128 or 32 x 512 tokens fill the 128 x 128 MXU),
# kernel_launch_us is 0 under XLA, and the rows' spread with chip count (the time a step grows
# 30% from 16 to 1024 chips at 32 sequences a chip) is not a compute rate.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
csv=data/published/lamb/you2019-lamb-table1.csv
check=0
[ "${1:-}" = "--check" ] && check=1
bench_build
bench_tmp
# The phase rows: two per published row, in file order (phase 1, then phase 2).
awk -F, -v dir="$PWD/data/published/lamb" 'BEGIN { OFS = "," }
  /^#/ || /^group,/ { next }
  { for (p = 1; p <= 2; p++)
      print $1, $2, $3, (p == 1 ? dir "/bert-large-seq128.ini" : "bert-large"), $4, $5, $6, $10 }' \
  "$csv" > "$tmp/phases"
awk -F, '/^#/ || /^group,/ { next } { print $7 "\t" $10 "\t" $11 }' "$csv" > "$tmp/rows"
# replay E: the phase rows' predicted step times at compute_efficiency E (none: the profile's).
replay() {
  {
    echo "group,topology,vary,model,split,global_batch,micro_batch,step_time_s"
    if [ "$1" = none ]; then cat "$tmp/phases"
    else awk -F, -v e="$1" 'BEGIN { OFS = "," } { $3 = ($3 == "" ? "" : $3 ";") "compute_efficiency=" e; print }' "$tmp/phases"
    fi
  } > "$tmp/in.csv"
  ./build/sim/trainsim validate --against "$tmp/in.csv" --format csv |
    awk -F, -v e="$1" 'NR > 1 { print e "\t" $12 }'
}
if [ $check = 1 ]; then
  replay none > "$tmp/grid.tsv"
else
  e=20
  while [ $e -le 90 ]; do
    replay "$(printf '0.%02d' $e)" >> "$tmp/grid.tsv"
    e=$((e + 1))
  done
fi
awk -F'\t' -v rowsf="$tmp/rows" -v check=$check '
  BEGIN { while ((getline l < rowsf) > 0) { split(l, f, "\t"); n++; chips[n] = f[1]; meas[n] = f[2]; set[n] = f[3] } }
  { k = int((NR - 1) / 2) % n + 1; e = $1; t[e, k] += (NR % 2 == 1 ? 0.9 : 0.1) * $2; effs[e] = 1 }
  END {
    for (e in effs) {
      fs = fn = hs = hn = 0
      for (k = 1; k <= n; k++) {
        err[e, k] = 100 * (t[e, k] / meas[k] - 1); a = err[e, k] < 0 ? -err[e, k] : err[e, k]
        if (set[k] == "fit") { fs += a; fn++ } else { hs += a; hn++ }
      }
      fm[e] = fs / fn; hm[e] = hs / hn
      if (best == "" || fm[e] < fm[best]) best = e
    }
    printf "%-6s %8s %16s %17s %8s  %s\n", "chips", "set", "measured_step_s", "predicted_step_s", "error", (check ? "(shipped profile)" : "(at the fitted " best ")")
    for (k = 1; k <= n; k++)
      printf "%-6s %8s %16.4f %17.4f %+7.1f%%\n", chips[k], set[k], meas[k], t[best, k], err[best, k]
    printf "TPU v3 %s: fit mean |error| %.1f%% (%d rows), held-out mean |error| %.1f%% (%d rows)\n",
      (check ? "shipped" : "fitted compute_efficiency " best), fm[best], fn, hm[best], hn
  }' "$tmp/grid.tsv"
