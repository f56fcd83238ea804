#!/bin/sh
# mpt_triton_h100.sh: what MPT's H100 rows (data/published/llm-foundry/mpt-h100.csv) would give if
# their Triton attention (attn_impl triton: every row but the large-scale 1B, 3B, 7B and 70B) ran
# as attn-kernel=triton at a rate carried over from the A100 profile's, instead of as
# FlashAttention-2. No published figure times that kernel on an H100 (data/published/
# flash-attention/PROVENANCE.txt). The carried-over rate: the A100 profile's
# flash_efficiency_triton (the FlashAttention-2 paper's A100 bars) in TFLOP/s, times how much
# faster the two kernels of the same paper's H100 figure that, like MPT's pre-MLIR Triton, use no
# Hopper instructions (FlashAttention 1 and 2) run there than on the A100 (geometric mean of their
# causal bars at 2k-16k, head widths 64 and 128), over the H100 profile's GEMM rate. Then the
# file's errors at that rate and at a few others (a what-if on a copy; the profile is not
# modified). docs/accuracy.md, "MosaicML LLM Foundry", fourth pass.
#
#   bench/mpt_triton_h100.sh            # ~10 s: one validate run per rate
#   bench/mpt_triton_h100.sh 0.22 0.25  # these rates besides the carried-over one
set -eu
for r in "$@"; do
  case "$r" in
  '' | *[!0-9.]* | *.*.*) echo "mpt_triton_h100.sh: argument '$r': expected a rate, a fraction such as 0.25" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_build
bench_tmp
fa=data/published/flash-attention
key() { sed -n "s/^$2 *= *\([0-9.]*\).*/\1/p" "topologies/chips/$1.ini" | head -n 1; }
a_tri=$(key a100-sxm4-80gb flash_efficiency_triton)
a_ce=$(key a100-sxm4-80gb compute_efficiency)
a_pk=$(key a100-sxm4-80gb peak_tflops_bf16)
h_ce=$(key h100-sxm5-80gb compute_efficiency)
h_pk=$(key h100-sxm5-80gb peak_tflops_bf16)
awk -F, -v a_tri="$a_tri" -v a_ce="$a_ce" -v a_pk="$a_pk" -v h_ce="$h_ce" -v h_pk="$h_pk" '
  FNR == 1 { chip = FILENAME ~ /h100/ ? "h100" : "a100" }
  /^#/ || $1 == "method" || $2 != "true" || $4 < 2048 || $5 == "" { next }
  $1 == "fa1" || $1 == "fa2" { lg[chip, $1] += log($5); n[chip, $1]++ }
  END {
    for (k = 1; k <= 2; k++) {
      m = k == 1 ? "fa1" : "fa2"
      r[m] = exp(lg["h100", m] / n["h100", m] - lg["a100", m] / n["a100", m])
      printf "%s: H100 / A100 causal 2k-16k = %.3f (%d and %d bars)\n", m, r[m], n["h100", m], n["a100", m]
    }
    ratio = sqrt(r["fa1"] * r["fa2"])
    out = a_tri * a_pk * a_ce * ratio / (h_pk * h_ce)
    printf "carried over: %.3f x %.1f TFLOP/s x %.3f / %.1f TFLOP/s = %.3f of the H100 GEMM rate\n", a_tri, a_pk * a_ce, ratio, h_pk * h_ce, out
    printf "%.3f\n", out
  }' "$fa/fa2-a100-fwd-bwd.csv" "$fa/fa2-h100-fwd-bwd.csv" > "$tmp/rate.txt"
sed '$d' "$tmp/rate.txt"
rate=$(tail -n 1 "$tmp/rate.txt")
lf=data/published/llm-foundry
printf "%-8s %s\n" rate "$(./build/sim/trainsim validate --against "$lf/mpt-h100.csv" 2>/dev/null | grep '^group')"
printf "%-8s %s\n" "as fa2" "$(./build/sim/trainsim validate --against "$lf/mpt-h100.csv" 2>/dev/null | grep '^all')"
for r in "$rate" "$@"; do
  # The triton rows state the kernel and the rate; model paths made absolute for the copy.
  awk -F, -v r="$r" -v dir="$root/$lf" 'BEGIN { OFS = "," }
    /^#/ || $1 == "group" { print; next }
    { sub(/models\//, dir "/models/")
      if ($NF == "triton") { sub(/kernels=eager/, "kernels=eager,attn-kernel=triton"); sub(/dim\.net\.size=[0-9]+/, "&;flash_efficiency_triton=" r) }
      print }' "$lf/mpt-h100.csv" > "$tmp/mpt-h100.csv"
  bench_validate "$tmp/out.txt" --against "$tmp/mpt-h100.csv"
  printf "%-8s %s\n" "$r" "$(grep '^all' "$tmp/out.txt")"
done
