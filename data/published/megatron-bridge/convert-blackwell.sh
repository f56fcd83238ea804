#!/bin/sh
# convert-blackwell.sh: writes nemo-b200-fp8.csv and nemo-gb200-fp8.csv (docs/accuracy.md,
# "Megatron-Bridge on DGX B200 and GB200") from NVIDIA's published Megatron-Bridge performance
# summaries (PROVENANCE.txt), quoted below. Run from anywhere; rewrites the CSVs beside it.
#
# As convert.sh: a step is global batch x sequence tokens,
#     step_time_s = GBS x S / (tokens/s/GPU x GPUs)
# The group says "(fit)" on the one row per chip that bench/fit_b200.sh fits compute_efficiency
# to (chosen before fitting: the one-node Llama 3 8B row of the 25.11 container); every other
# row is held out. The container column names the NeMo container of the measurement.
set -eu
cd "$(dirname "$0")"
# the 405B's pipeline (account_for_embedding_in_pipeline_split and _loss_: 126 blocks, the
# embedding and the loss over 64 chunks): embedding + 1 block, 62 x 2 blocks, 1 block + loss
st405="6$(i=0; while [ $i -lt 62 ]; do printf ':10'; i=$((i + 1)); done):7"
header="group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tokens_per_s_per_gpu,gpus,container"
# row GROUP TOPOLOGY VARY MODEL SPLIT GBS MBS TOKENS GPUS CONTAINER (sequence 8192 throughout)
row() {
  t=$(awk -v B="$6" -v x="$8" -v n="$9" 'BEGIN { printf "%.6g", B * 8192 / (x * n) }')
  echo "$1,$2,$3,$4,\"$5\",$6,$7,25,$t,$8,$9,${10}"
}
# Llama 3 8B on one node of 8: data-parallel over 8 with the distributed optimizer, no tp/pp/cp,
# micro-batch 2, CUDA graphs of the whole iteration (not modelled: launches are hidden anyway).
dp8="recompute=none,dp=8,zero=1,dp-overlap,precision=fp8,fp8-cache"
{
  echo "# NVIDIA Megatron-Bridge performance summary, DGX-B200, FP8 current scaling, pre-training: step_time_s ="
  echo "# GBS x 8192 / (tokens/s/GPU x GPUs) (convert-blackwell.sh). Settings from the table and the repository's"
  echo "# perf recipes (PROVENANCE.txt). The \"(fit)\" row is bench/fit_b200.sh's fit of b200.ini; the others are held out."
  echo "$header"
  row "Megatron-Bridge B200 FP8 (fit)" dgx-b200-4node dim.net.size=1 llama3-8b "$dp8" 128 2 30624 8 25.11
  row "Megatron-Bridge B200 FP8" dgx-b200-4node dim.net.size=1 llama3-8b "$dp8" 128 2 29994 8 25.09
  # Llama 3.1 405B on 16 nodes: tp 4 x cp 2 in a node, dp 2 x pp 8 across nodes (rank order
  # tp, cp, dp, pp), interleaved VP 8, global batch 64 (32 micro-batches of 1).
  for c in "25.11 661" "25.09 664"; do
    # shellcheck disable=SC2086 # "CONTAINER TOKENS", split on purpose
    set -- $c
    row "Megatron-Bridge B200 FP8" dgx-b200-4node dim.net.size=16 llama3-405b \
      "recompute=none,sp,tp=4@node,cp=2@node,dp=2@net,pp=8@net,zero=1,dp-overlap,tp-overlap,precision=fp8,fp8-cache,schedule=interleaved:8,stages=$st405" \
      64 1 "$2" 128 "$1"
  done
} >nemo-b200-fp8.csv
{
  echo "# NVIDIA Megatron-Bridge performance summary, DGX-GB200 (GB200 NVL72 racks), FP8 current scaling, pre-training:"
  echo "# step_time_s = GBS x 8192 / (tokens/s/GPU x GPUs) (convert-blackwell.sh). Settings from the table and the"
  echo "# repository's perf recipes (PROVENANCE.txt). The \"(fit)\" row is bench/fit_b200.sh's fit of gb200.ini; the"
  echo "# others are held out."
  echo "$header"
  row "Megatron-Bridge GB200 FP8 (fit)" gb200-nvl72-8rack "dim.nvl.size=8;dim.net.size=1" llama3-8b "$dp8" 128 2 31508 8 25.11
  row "Megatron-Bridge GB200 FP8" gb200-nvl72-8rack "dim.nvl.size=8;dim.net.size=1" llama3-8b "$dp8" 128 2 31357 8 25.09
  # Llama 3 70B on 64 GPUs of one NVLink domain: Megatron-FSDP over all 64 (optim_grads_params:
  # ZeRO-3), micro-batch 2, no FP8 weight cache (keep_fp8_transpose_cache False).
  for c in "25.11 4312" "26.04.01 4224"; do
    # shellcheck disable=SC2086 # "CONTAINER TOKENS", split on purpose
    set -- $c
    row "Megatron-Bridge GB200 FP8" gb200-nvl72-8rack "dim.nvl.size=64;dim.net.size=1" llama3-70b \
      "recompute=none,dp=64,zero=3,precision=fp8" 256 2 "$2" 64 "$1"
  done
  # Llama 3.1 405B on 4 NVLink domains of 64: tp 4 x dp 4 x 4 of the 16 pipeline stages in a
  # domain, the pipeline across 4 (rank order tp, cp, dp, pp), interleaved VP 4, global batch 1536.
  for c in "25.11 813" "26.04.01 864"; do
    # shellcheck disable=SC2086 # "CONTAINER TOKENS", split on purpose
    set -- $c
    row "Megatron-Bridge GB200 FP8" gb200-nvl72-8rack "dim.nvl.size=64;dim.net.size=4" llama3-405b \
      "recompute=none,sp,tp=4@nvl,dp=4@nvl,pp=16@nvl+net,zero=1,dp-overlap,tp-overlap,precision=fp8,fp8-cache,schedule=interleaved:4,stages=$st405" \
      1536 1 "$2" 256 "$1"
  done
} >nemo-gb200-fp8.csv
