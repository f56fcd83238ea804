#!/bin/sh
# convert.sh: writes grattafiori2024-table4.csv (docs/accuracy.md, "Further held-out large runs")
# from Table 4 of "The Llama 3 Herd of Models" (arXiv 2407.21783). Run from anywhere; rewrites
# the CSV beside this script.
#
# Table 4 publishes model teraFLOP/s per GPU (BF16 MFU 43% and 41% at 8K tokens), not step times.
# MFU is Chowdhery et al.'s (PaLM, appendix B), which the paper cites: model FLOPs per token
#     F = 6 N + 12 L H Q T
# with N the parameters (405,853,388,800, the released checkpoint), L = 126 layers, H = 128 heads,
# Q = 128 the head width, T = 8192 the sequence (no recomputation counted). A step is
# tokens/batch = DP x batch/DP x T = 2048 x 8192 = 16,777,216 tokens ("16M"), so
#     step_time_s = 16,777,216 F / (X x 1e12 x GPUs)
# with X the table's TFLOPs/GPU, printed to two digits (430, 400): +-1.2% of rounding.
set -eu
cd "$(dirname "$0")"
N=405853388800
L=126
H=128
Q=128
T=8192
# stages PP V: Llama 3's pipeline (section 3.3.2): the first model chunk of the first rank holds
# only the embedding, the last chunk of the last rank only the output projection and loss, every
# other one of the PP x V chunks one transformer block (5 trainsim layers): with PP = 16 that is
# 2 + 126 = 128 chunks, V = 8.
stages() {
  st=1
  k=1
  while [ $k -lt $(($1 * $2 - 1)) ]; do
    st="$st:5"
    k=$((k + 1))
  done
  echo "$st:2"
}
{
  echo "# Grattafiori et al. 2024, The Llama 3 Herd of Models (arXiv 2407.21783), Table 4: Llama 3 405B"
  echo "# pre-training at 8K tokens on 8,192 and 16,384 H100 80GB (Grand Teton, 8 GPUs on NVLink, 400 Gb/s"
  echo "# RoCE per GPU). step_time_s = 16,777,216 tokens x (6 N + 12 L H Q T) / (TFLOPs/GPU x GPUs)"
  echo "# (convert.sh). Micro-batch 1 and V = 8 are inferred (PROVENANCE.txt). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tflops_per_gpu,gpus,tp,pp,dp"
  while read -r n tp pp dp bdp X; do
    nodes=$((n / 8))
    B=$((dp * bdp))
    V=8
    st=$(stages "$pp" $V)
    t=$(awk -v N=$N -v L=$L -v H=$H -v Q=$Q -v T=$T -v B="$B" -v X="$X" -v n="$n" \
      'BEGIN { F = 6 * N + 12 * L * H * Q * T; printf "%.6g", B * T * F / (X * 1e12 * n) }')
    echo "Llama 3 405B 8K,dgx-h100-64node,dim.net.size=$nodes,llama3-405b,\"recompute=none,sp,tp=$tp@node,pp=$pp@net,dp=$dp@net,zero=2,schedule=interleaved:$V,stages=$st\",$B,1,25,$t,$X,$n,$tp,$pp,$dp"
  done <<'TABLE'
8192 8 16 64 32 430
16384 8 16 128 16 400
TABLE
} >grattafiori2024-table4.csv
