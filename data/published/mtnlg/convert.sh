#!/bin/sh
# convert.sh: writes smith2022-mtnlg.csv (docs/accuracy.md, "Further held-out large runs") from
# the iteration times published by Smith et al. 2022 (arXiv 2201.11990), quoted below with the
# configuration the paper gives. Run from anywhere; rewrites the CSV beside this script.
#
# The paper publishes the time per iteration directly (global batch 1920 sequences of 2048 on
# 280, 350 and 420 DGX A100 nodes: 60.1, 50.2, 44.4 s), with the achieved teraFLOP/s per GPU
# (126, 121, 113); the second is the first through Megatron's FLOP count (convert.sh of
# data/published/megatron), kept as a cross-check column.
set -eu
cd "$(dirname "$0")"
# stages LAYERS PP: DeepSpeed's pipeline split (uniform over the transformer blocks, LAYERS / PP
# a stage) as trainsim's stages= list, 5 trainsim layers a block, the embedding on the first
# stage, the final norm and the (tied) logits on the last.
stages() {
  b=$(($1 / $2))
  st=$((b * 5 + 1))
  k=1
  while [ $k -lt $(($2 - 1)) ]; do
    st="$st:$((b * 5))"
    k=$((k + 1))
  done
  echo "$st:$((b * 5 + 2))"
}
{
  echo "# Smith et al. 2022 (arXiv 2201.11990), MT-NLG 530B on Selene (DGX A100 80GB, 8x HDR 200 Gb/s"
  echo "# per node): time per iteration at global batch 1920, tp 8, pp 35, dp = GPUs / 280."
  echo "# Micro-batch 1 and full recomputation are assumptions (PROVENANCE.txt). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tflops_per_gpu,gpus"
  while read -r nodes t X; do
    n=$((nodes * 8))
    dp=$((n / 280))
    st=$(stages 105 35)
    echo "MT-NLG 530B,dgx-a100-32node,dim.net.size=$nodes,megatron-gpt-530b,\"recompute=full,attention=unfused,tp=8@node,pp=35@net,dp=$dp@net,schedule=1f1b,p2p=blocking,stages=$st\",1920,1,1048576,$t,$X,$n"
  done <<'TABLE'
280 60.1 126
350 50.2 121
420 44.4 113
TABLE
} >smith2022-mtnlg.csv
