#!/bin/sh
# convert.sh: writes mcore-h100-weak-scaling.csv (docs/accuracy.md, "Further held-out large runs")
# from Megatron-LM's published H100 weak-scaling table (PROVENANCE.txt), quoted below. Run from
# anywhere; rewrites the CSV beside this script.
#
# The table publishes per-GPU teraFLOP/s, counted by Megatron-LM's num_floating_point_operations
# (megatron/training/training.py at the same commit) for a GPT block without grouped-query
# attention or SwiGLU:
#     F = 12 B s l h^2 (2 + s/h + 4 + V/(2 l h))      per iteration of batch B,
# so the iteration took   step_time_s = F / (X * 1e12 * N)   with X the table's teraFLOP/s per
# GPU (printed to 4 digits: +-0.01%) and N its GPUs; s = 4096, V = 131,072.
set -eu
cd "$(dirname "$0")"
s=4096
V=131072
{
  echo "# Megatron-Core r0.8.0 weak scaling on DGX H100 (Megatron-LM README, images/model_table.png,"
  echo "# commit f2e5db402c). step_time_s = 12 B s l h^2 (6 + s/h + V/(2 l h)) / (TFLOP/s per GPU x GPUs),"
  echo "# s = 4096, V = 131072 (convert.sh). Micro-batch 1 and no recomputation are assumptions"
  echo "# (PROVENANCE.txt). Rows with pipeline parallelism are left out. Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tflops_per_gpu,gpus,layers,hidden"
  # name layers hidden tp gpus batch TFLOP/s
  while read -r name l h tp n B X; do
    nodes=$((n / 8))
    dp=$((n / tp))
    if [ "$tp" -eq 1 ]; then
      split="recompute=none,attn-kernel=cudnn,dp=$dp@node+net,zero=1,dp-overlap"
    elif [ "$tp" -lt 8 ]; then
      split="recompute=none,attn-kernel=cudnn,sp,tp=$tp@node,dp=$dp@node+net,zero=1,dp-overlap,tp-overlap"
    else
      split="recompute=none,attn-kernel=cudnn,sp,tp=$tp@node,dp=$dp@net,zero=1,dp-overlap,tp-overlap"
    fi
    t=$(awk -v B="$B" -v s=$s -v l="$l" -v h="$h" -v V=$V -v X="$X" -v n="$n" \
      'BEGIN { F = 12 * B * s * l * h * h * (6 + s / h + V / (2 * l * h)); printf "%.6g", F / (X * 1e12 * n) }')
    echo "Megatron-Core H100 weak scaling,dgx-h100-64node,dim.net.size=$nodes,models/mcore-gpt-$name.ini,\"$split\",$B,1,25,$t,$X,$n,$l,$h"
  done <<'TABLE'
1.7b 24 2048 1 48 192 408.8
7.1b 30 4096 2 96 192 465.9
16b 32 6144 4 192 192 489.1
32b 48 7168 8 384 192 459.6
TABLE
} >mcore-h100-weak-scaling.csv
