#!/bin/sh
# vtrain_layers.sh: splits vTrain's single-node Megatron step times, measured and predicted, into
# a time per layer and micro-batch (A), per micro-batch (B) and per layer and step (D), group by
# group (same tp, pp, width, micro-batch; docs/accuracy.md, "What the single-node rows
# contain"), and prints them side by side with the device's own A (the same rows replayed with
# kernel_launch_us = 0: no host launch floor), so which term of trainsim's layer is off, and
# where, can be read per tp and width.
#
#   bench/vtrain_layers.sh            # pp = 1 groups (the default)
#   bench/vtrain_layers.sh all        # every pp
#
# Each group's rows fit step = n (L A + B) + L D_dp + E_dp exactly to 0.05 ms (n micro-batches
# per replica, L layers, D and E per data-parallel degree; least squares). Groups whose rows
# do not determine A and B apart (one n, or one L) are left out. The repository's profile is
# not modified: the device-only replay runs on a copy in a temporary folder.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
which=${1:-pp1}
bench_build
bench_tmp
mkdir -p "$tmp/chips"
cp topologies/dgx-a100-1node.ini "$tmp/"
sed -e 's/^kernel_launch_us = .*/kernel_launch_us = 0/' topologies/chips/a100-sxm4-80gb.ini \
  >"$tmp/chips/a100-sxm4-80gb.ini"
csv=data/published/vtrain/megatron-single.csv
sed -e 's/,dgx-a100-1node,/,dgx-a100-1node.ini,/' -e "s|,models/|,$root/data/published/vtrain/models/|" \
  "$csv" >"$tmp/single.csv"
bench_validate "$tmp/base.csv" --against "$csv" --format csv -j 2
(cd "$tmp" && bench_validate device.csv --against single.csv --format csv -j 2)
awk -v which="$which" "$(cat bench/csv_fields.awk)"'
  function deg(s, ax) {
    if (match(s, ax "=[0-9]+")) return substr(s, RSTART + length(ax) + 1, RLENGTH - length(ax) - 1) + 0
    return 1
  }
  # Least squares by the normal equations, Gauss-Jordan with partial pivoting; 0 if singular.
  function solve(g, y, k,    i, j, r, c, p, t, f, M) {
    for (i = 1; i <= k; i++) {
      for (j = 1; j <= k; j++) M[i, j] = 0
      M[i, k + 1] = 0
    }
    for (r = 1; r <= cnt[g]; r++)
      for (i = 1; i <= k; i++) {
        for (j = 1; j <= k; j++) M[i, j] += X[g, r, i] * X[g, r, j]
        M[i, k + 1] += X[g, r, i] * Y[y, g, r]
      }
    for (c = 1; c <= k; c++) {
      p = c
      for (r = c + 1; r <= k; r++) if ((M[r, c] < 0 ? -M[r, c] : M[r, c]) > (M[p, c] < 0 ? -M[p, c] : M[p, c])) p = r
      if ((M[p, c] < 0 ? -M[p, c] : M[p, c]) < 1e-9) return 0
      for (j = 1; j <= k + 1; j++) { t = M[c, j]; M[c, j] = M[p, j]; M[p, j] = t }
      for (r = 1; r <= k; r++) if (r != c) {
        f = M[r, c] / M[c, c]
        for (j = 1; j <= k + 1; j++) M[r, j] -= f * M[c, j]
      }
    }
    for (i = 1; i <= k; i++) S[y, i] = M[i, k + 1] / M[i, i]
    return 1
  }
  FNR == 1 { file++; next }
  {
    fields($0, f)
    model = f[5]; spl = f[6]; gb = f[7]; mb = f[8]
    h = model; sub(/.*-h/, "", h); sub(/-.*/, "", h)
    L = model; sub(/.*-l/, "", L); sub(/-.*/, "", L)
    tp = deg(spl, "tp"); pp = deg(spl, "pp"); dp = deg(spl, "dp")
    if (which == "pp1" && pp != 1) next
    g = tp " " pp " " h " " mb
    key = f[1]
    if (file == 1) {
      if (!(g in cnt)) { order[++ng] = g; cnt[g] = 0 }
      r = ++cnt[g]; row[g, key] = r
      n = gb / mb / dp
      Nr[g, r] = n; Lr[g, r] = L; Dp[g, r] = dp
      if (!((g, dp) in dpi)) { dpi[g, dp] = ++ndp[g]; dpv[g, ndp[g]] = dp }
      Y[1, g, r] = f[11] * 1000; Y[2, g, r] = f[12] * 1000
      e = f[13] + 0; ae[g] += e < 0 ? -e : e; be[g] += e
    } else if ((g, key) in row) {
      Y[3, g, row[g, key]] = f[12] * 1000
    }
  }
  END {
    printf "%-3s %-3s %-5s %-3s %4s | %-23s | %-15s | %-13s | %s\n", "tp", "pp", "h", "mb", "rows",
      "A ms meas / pred / dev", "B ms meas / pred", "D ms meas / pred", "mean |error|, bias"
    for (q = 1; q <= ng; q++) {
      g = order[q]; k = 2 + 2 * ndp[g]
      for (r = 1; r <= cnt[g]; r++) {
        X[g, r, 1] = Nr[g, r] * Lr[g, r]; X[g, r, 2] = Nr[g, r]
        for (d = 1; d <= ndp[g]; d++) {
          X[g, r, 2 + d] = dpi[g, Dp[g, r]] == d ? Lr[g, r] : 0
          X[g, r, 2 + ndp[g] + d] = dpi[g, Dp[g, r]] == d ? 1 : 0
        }
      }
      if (!solve(g, 1, k) || !solve(g, 2, k) || !solve(g, 3, k)) continue
      split(g, a, " ")
      dm = 1
      for (d = 2; d <= ndp[g]; d++) if (dpv[g, d] < dpv[g, dm]) dm = d
      printf "%-3s %-3s %-5s %-3s %4d | %6.3f / %6.3f / %6.3f | %6.2f / %6.2f | %5.2f / %5.2f | %5.1f%% %+5.1f%%\n",
        a[1], a[2], a[3], a[4], cnt[g], S[1, 1], S[2, 1], S[3, 1], S[1, 2], S[2, 2], S[1, 2 + dm], S[2, 2 + dm],
        ae[g] / cnt[g], be[g] / cnt[g] | "sort -k1,1n -k2,2n -k3,3n -k4,4n"
    }
    close("sort -k1,1n -k2,2n -k3,3n -k4,4n")
    print "(D at the group'"'"'s smallest data-parallel degree; dev: the device'"'"'s own A, kernel_launch_us = 0)"
  }' "$tmp/base.csv" "$tmp/device.csv"
