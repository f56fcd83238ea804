#!/bin/sh
# convert.sh: writes nemo-h100-fp8.csv (docs/accuracy.md, "Further held-out large runs") from
# NVIDIA's published Megatron-Bridge performance summary (PROVENANCE.txt), quoted below. Run from
# anywhere; rewrites the CSV beside this script.
#
# The table publishes tokens per second per GPU with the run's configuration (GPUs, precision,
# global batch, micro-batch, sequence, TP, PP, CP, VP); a step is global batch x sequence tokens:
#     step_time_s = GBS x S / (tokens/s/GPU x GPUs)
# The tokens/s are printed to 3-4 digits: under 0.2% of rounding.
set -eu
cd "$(dirname "$0")"
# stages LAYOUT: a pipeline layout as trainsim's stages= list, one count a model chunk: "E"
# the embedding (1 trainsim layer), "t" a transformer block (5), "L" the final norm and logits (2).
stages() {
  echo "$1" | tr '|' '\n' | awk '
    { n = 0; s = $0
      if (sub(/^E/, "", s)) n += 1
      if (sub(/L$/, "", s)) n += 2
      n += 5 * length(s)
      out = out (NR > 1 ? ":" : "") n }
    END { print out }'
}
# repeat STR N: STR N times, each followed by "|".
repeat() {
  r=""
  k=0
  while [ $k -lt "$2" ]; do
    r="$r$1|"
    k=$((k + 1))
  done
  printf %s "$r"
}
{
  echo "# NVIDIA Megatron-Bridge performance summary, NeMo container 26.04.01, DGX-H100, FP8 (current"
  echo "# scaling), pre-training: step_time_s = GBS x sequence / (tokens/s/GPU x GPUs) (convert.sh)."
  echo "# Pipeline layouts and overlap settings from the repository's perf recipes (PROVENANCE.txt)."
  echo "# Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tokens_per_s_per_gpu,gpus"
  while read -r model n B S tp pp cp vp layout tok; do
    dp=$((n / (tp * pp * cp)))
    nodes=$((n / 8))
    st=$(stages "$layout")
    t=$(awk -v B="$B" -v S="$S" -v x="$tok" -v n="$n" 'BEGIN { printf "%.6g", B * S / (x * n) }')
    # Megatron's rank order is tp, cp, dp, pp (tp fastest): with tp 4 the node's other factor
    # of 2 is data-parallel.
    par="tp=$tp@node,pp=$pp@net,dp=$dp@net"
    [ "$tp" -eq 4 ] && par="tp=$tp@node,dp=$dp@node,pp=$pp@net"
    [ "$cp" -gt 1 ] && par="tp=$tp@node,cp=$cp@net,dp=$dp@net,pp=$pp@net"
    echo "Megatron-Bridge H100 FP8,dgx-h100-64node,dim.net.size=$nodes,$model,\"recompute=none,attn-kernel=cudnn,sp,$par,zero=1,dp-overlap,tp-overlap,precision=fp8,fp8-cache,schedule=interleaved:$vp,stages=$st\",$B,1,25,$t,$tok,$n"
  done <<TABLE
llama3-70b 64 256 8192 4 8 1 5 Ett|$(repeat 't*2' 34 | sed 's/t\*2/tt/g')ttt|$(repeat tt 3)tL 1664
llama3-405b 1024 1536 8192 8 8 2 8 Et|$(repeat tt 62)tL 328
TABLE
} >nemo-h100-fp8.csv
# nemo-h100-moe.csv: the mixture-of-experts rows of the same container's table that trainsim can
# express (PROVENANCE.txt): expert parallelism over all of dp, no tp or pp.
{
  echo "# NVIDIA Megatron-Bridge performance summary, NeMo container 26.04.01, DGX-H100, mixture-of-experts"
  echo "# pre-training: step_time_s = GBS x sequence / (tokens/s/GPU x GPUs) (convert.sh). Settings from"
  echo "# the repository's perf recipe (PROVENANCE.txt). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tokens_per_s_per_gpu,gpus"
  while read -r model n B S ep prec tok; do
    nodes=$((n / 8))
    t=$(awk -v B="$B" -v S="$S" -v x="$tok" -v n="$n" 'BEGIN { printf "%.6g", B * S / (x * n) }')
    p=""
    [ "$prec" = fp8 ] && p=",precision=fp8,fp8-cache"
    echo "Megatron-Bridge H100 MoE,dgx-h100-64node,dim.net.size=$nodes,models/$model.ini,\"recompute=none,attn-kernel=cudnn,dp=$n,ep=$ep,zero=1,dp-overlap$p\",$B,1,25,$t,$tok,$n"
  done <<TABLE
qwen3-30b-a3b 16 1024 4096 16 fp8 8960
TABLE
} >nemo-h100-moe.csv
