#!/bin/sh
# convert.sh: writes the two measurement files of this folder (docs/accuracy.md, "Megatron-LM on
# A100") from the published tables below. Run from anywhere; rewrites narayanan2021-table1.csv
# and korthikanti2022-table4.csv beside this script.
#
# Narayanan et al. 2021 (arXiv 2104.04473, SC'21), Table 1 publishes achieved teraFLOP/s per GPU,
# not step times. Its FLOP count (section 5.1, equation 3, with activation recomputation: one
# extra forward) is
#     F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))      per iteration of batch B,
# so the iteration took   step_time_s = F / (X * 1e12 * N)   with X the table's teraFLOP/s per
# GPU and N its GPUs. X is printed to 3 digits, so each step time carries +-0.4% of rounding.
# The micro-batch, data-parallel implementation and interleaving of every row are those of
# Megatron-LM's own script for the table (examples/sc21/run_table_1.sh, PROVENANCE.txt).
#
# Korthikanti et al. 2022 (arXiv 2205.05198), Table 4 publishes iteration times directly
# (seconds, full recomputation vs. selective recomputation + sequence parallelism); the model
# shapes are its Table 3; micro-batch and interleaving as Calculon's validation files give them.
set -eu
cd "$(dirname "$0")"
s=2048
V=51200
# stages LAYERS PP CHUNKS: Megatron's pipeline split as trainsim's stages= list: LAYERS / (PP x
# CHUNKS) blocks a stage (5 trainsim layers a block), the embedding on the first, the final norm
# and the logits on the last.
stages() {
  b=$(($1 / ($2 * $3)))
  st=$((b * 5 + 1))
  k=1
  while [ $k -lt $(($2 * $3 - 1)) ]; do
    st="$st:$((b * 5))"
    k=$((k + 1))
  done
  echo "$st:$((b * 5 + 2))"
}
{
  echo "# Narayanan et al. 2021 (arXiv 2104.04473), Table 1, on Selene (DGX A100 80GB, 8x HDR"
  echo "# 200 Gb/s per node). step_time_s = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (TFLOP/s per"
  echo "# GPU x GPUs), s = 2048, V = 51200 (convert.sh). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tflops_per_gpu,gpus,layers,hidden"
  # name  layers hidden tp pp gpus batch mbs ddp V(chunks) TFLOP/s
  while read -r name l h tp pp n B mbs ddp chunks X; do
    nodes=$((n / 8))
    dp=$((n / (tp * pp)))
    if [ "$tp" -eq 1 ]; then
      split="dp=$dp@node+net"
    elif [ "$tp" -lt 8 ]; then
      split="tp=$tp@node,dp=$dp@node+net"
    else
      split="tp=$tp@node,dp=$dp@net"
    fi
    if [ "$pp" -gt 1 ]; then
      split="tp=$tp@node,pp=$pp@net,dp=$dp@net"
      st=$(stages "$l" "$pp" "$chunks")
      if [ "$chunks" -gt 1 ]; then
        split="$split,schedule=interleaved:$chunks,p2p=blocking,stages=$st"
      else
        split="$split,schedule=1f1b,p2p=blocking,stages=$st"
      fi
    fi
    # torch DDP: bucketed all-reduce overlapped with the backward (25 MB buckets); Megatron's
    # local DDP (2021): one all-reduce of the contiguous gradient buffer after the backward.
    bucket=25
    [ "$ddp" = local ] && bucket=1048576
    t=$(awk -v B="$B" -v s=$s -v l="$l" -v h="$h" -v V=$V -v X="$X" -v n="$n" \
      'BEGIN { F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)); printf "%.6g", F / (X * 1e12 * n) }')
    g="Table 1 pp=1"
    [ "$pp" -gt 1 ] && g="Table 1 pp>1"
    # tp-grad=serial: the input gradient's tensor-parallel all-reduce after the linear's whole
    # backward, as the mpu of the Megatron-LM of these runs (before its asynchronous all-reduce,
    # async_tensor_model_parallel_allreduce) runs it; no effect at tp = 1.
    # dp-engine=autograd: the fp16 gradients kept in .grad and added by autograd from the
    # second micro-batch on; the script's --fp16 with local DDP without contiguous buffers, or
    # torch DDP under no_sync, before Megatron-LM's gradient_accumulation_fusion (83b1e42,
    # February 2022); no effect with one micro-batch.
    echo "$g,dgx-a100-32node,dim.net.size=$nodes,megatron-gpt-$name,\"recompute=full,attention=unfused,tp-grad=serial,dp-engine=autograd,$split\",$B,$mbs,$bucket,$t,$X,$n,$l,$h"
  done <<'TABLE'
1.7b 24 2304 1 1 32 512 16 torch 1 137
3.6b 30 3072 2 1 64 512 16 torch 1 138
7.5b 36 4096 4 1 128 512 16 torch 1 142
18b 40 6144 8 1 256 1024 8 torch 1 135
39b 48 8192 8 2 512 1536 4 local 1 138
76b 60 10240 8 4 1024 1792 2 local 3 140
145b 80 12288 8 8 1536 2304 2 local 2 148
310b 96 16384 8 16 1920 2160 1 local 2 155
530b 105 20480 8 35 2520 2520 1 local 3 163
1t 128 25600 8 64 3072 3072 1 local 1 163
TABLE
} >narayanan2021-table1.csv
{
  echo "# Korthikanti et al. 2022 (arXiv 2205.05198), Table 4: iteration time (s) with full"
  echo "# recomputation and with selective recomputation + sequence parallelism; models and"
  echo "# splits of its Table 3 (data-parallel size 1). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s"
  while read -r name model l tp pp n B mbs chunks full sel; do
    nodes=$((n / 8))
    topo=dgx-a100-32node
    vary="dim.net.size=$nodes"
    if [ "$nodes" -eq 1 ]; then
      topo=dgx-a100-1node
      vary=
    fi
    split="tp=$tp@node"
    if [ "$pp" -gt 1 ]; then
      st=$(stages "$l" "$pp" "$chunks")
      sched=1f1b
      [ "$chunks" -gt 1 ] && sched="interleaved:$chunks"
      split="$split,pp=$pp@net,schedule=$sched,p2p=blocking,stages=$st"
    fi
    echo "full recompute,$topo,$vary,$model,\"recompute=full,attention=unfused,$split\",$B,$mbs,1048576,$full"
    echo "selective + sp,$topo,$vary,$model,\"recompute=selective,sp,attention=unfused,$split\",$B,$mbs,1048576,$sel"
  done <<'TABLE'
22B models/megatron-gpt-22b.ini 48 8 1 8 4 4 1 1.42 1.10
175B models/megatron-gpt-175b.ini 96 8 8 64 64 1 3 18.13 13.75
530B megatron-gpt-530b 105 8 35 280 280 1 3 49.05 37.83
1T megatron-gpt-1t 128 8 64 512 512 1 1 94.42 71.49
TABLE
} >korthikanti2022-table4.csv
