#!/bin/sh
# fit_tpu_dcn.sh: sets the TensorCore's time per data-centre-network transfer, [dim.dcn]
# transfer_stall_us, from the slope of MaxText's v5e multi-slice tables over the slice count
# (data/published/maxtext/multislice.csv; docs/accuracy.md, "MaxText multi-slice"), and prints
# what the value gives on the rows that did not set it.
#
#   nice -n 19 bench/fit_tpu_dcn.sh   # about 10 s
#
# The stall adds a fixed time per DCN transfer, so a model's step grows linearly with it: with
# the stall at 0 and at 100 us, the growth of the step from 2 to 32 slices, d(0) and d(100), gives
# the stall that makes the predicted growth the measured one, 100 (m - d(0)) / (d(100) - d(0)).
# Only the 16B and 64B rows set it (their mean); 32B, 128B and v5p are the check. The value goes
# into data/published/maxtext/tpu-v5e-16x16-dcn.ini by hand, with the numbers this prints.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
src=data/published/maxtext
bench_build
bench_tmp
predict() { # $1 = stall (us): the file's predicted step per line, "line step_s"
  mkdir -p "$tmp/$1"
  for f in "$src"/tpu-*-dcn.ini; do
    sed "s/^transfer_stall_us = .*/transfer_stall_us = $1/" "$f" > "$tmp/$1/$(basename "$f")"
  done
  cp "$src/multislice.csv" "$tmp/$1/"
  ./build/sim/trainsim validate --against "$tmp/$1/multislice.csv" --format csv |
    awk 'NR > 1 { # the quoted split and detail hold commas: blank them so the columns count
      q = 0; o = ""; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1)
        if (c == "\"") q = !q; else if (q && c == ",") c = ";"; o = o c }
      split(o, f, ","); print f[1], f[12] }' > "$tmp/pred$1"
}
predict 0
predict 100
# measured step per line: 2 and 32 slices of each v5e model
awk '/^#/ || /^group,/ { next }
  { q = 0; o = ""; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1)
      if (c == "\"") q = !q; else if (q && c == ",") c = ";"; o = o c }
    split(o, f, ",") }
  f[1] ~ /v5e/ { n = split(f[3], v, "="); print NR, f[4], v[n], f[8] }' \
  "$src/multislice.csv" > "$tmp/meas"
awk -v p0="$tmp/pred0" -v p1="$tmp/pred100" '
  BEGIN { while ((getline l < p0) > 0) { split(l, w, " "); z[w[1]] = w[2] }
          while ((getline l < p1) > 0) { split(l, w, " "); h[w[1]] = w[2] } }
  { line[$2, $3] = $1; meas[$2, $3] = $4; models[$2] = 1 }
  END {
    printf "%-14s %12s %12s %12s %10s\n", "#model", "measured_ms", "stall0_ms", "per_us_ms", "stall_us"
    n = 0; sum = 0
    for (m in models) {
      a = line[m, 2]; b = line[m, 32]
      d = (meas[m, 32] - meas[m, 2]) * 1e3; d0 = (z[b] - z[a]) * 1e3; d1 = (h[b] - h[a]) * 1e3
      s = 100 * (d - d0) / (d1 - d0)
      printf "%-14s %12.0f %12.0f %12.3f %10.0f%s\n", m, d, d0, (d1 - d0) / 100, s,
        (m == "maxtext-16b" || m == "maxtext-64b") ? "  (sets it)" : "  (check)"
      if (m == "maxtext-16b" || m == "maxtext-64b") { sum += s; n++ }
    }
    printf "transfer_stall_us = %.0f (mean of the rows that set it)\n", sum / n
  }' "$tmp/meas" | sort
