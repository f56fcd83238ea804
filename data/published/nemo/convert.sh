#!/bin/sh
# convert.sh: writes nemo-24.07-h100-fp8.csv (docs/accuracy.md, "NeMo 24.07 on DGX H100") from
# NVIDIA's published NeMo 24.07 pre-training table (PROVENANCE.txt), quoted below. Run from
# anywhere; rewrites the CSV beside this script.
#   step_time_s = GBS x sequence / (tokens/s/GPU x GPUs)
# Megatron's rank order is tp, cp, dp, pp (tp fastest), 8 GPUs a node: each axis is placed on
# the node while it has room, then across nodes.
set -eu
cd "$(dirname "$0")"
# model_path NAME: a model file beside this script, or a shipped one (models/NAME.ini).
model_path() {
  case "$1" in
  *.ini) echo "$1" ;;
  *) echo "../../../models/$1.ini" ;;
  esac
}
{
  echo "# NeMo 24.07 pre-training performance, DGX-H100, FP8 (NVIDIA NeMo docs/source/performance/"
  echo "# performance_summary.md; PROVENANCE.txt): step_time_s = GBS x sequence / (tokens/s/GPU x GPUs)"
  echo "# (convert.sh). Overlap and recompute settings from NeMo-Framework-Launcher 24.07's training"
  echo "# configs (ASSUMED to be what ran; the table changed GBS and VP from them). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_s,published_tokens_per_s_per_gpu,published_model_tflops_per_gpu,gpus"
  while read -r model n B mb S tp pp cp vp tpo tok tflops rc; do
    dp=$((n / (tp * pp * cp)))
    nodes=$((n / 8))
    t=$(awk -v B="$B" -v S="$S" -v x="$tok" -v n="$n" 'BEGIN { printf "%.6g", B * S / (x * n) }')
    # Place tp, cp, dp, pp in that order: inside the node while it has room.
    par=$(awk -v tp="$tp" -v cp="$cp" -v dp="$dp" -v pp="$pp" 'BEGIN {
      room = 8; split("tp cp dp pp", name, " "); deg["tp"] = tp; deg["cp"] = cp; deg["dp"] = dp; deg["pp"] = pp
      for (i = 1; i <= 4; i++) {
        a = name[i]; d = deg[a]
        if (d == 1 && a != "dp") continue
        if (room >= d) { where = "node"; room /= d }
        else if (room > 1) { where = "node+net"; room = 1 }
        else where = "net"
        out = out (out == "" ? "" : ",") a "=" d "@" where
      }
      print out }')
    opt="recompute=$rc,attn-kernel=cudnn"
    [ "$tp" -gt 1 ] && opt="$opt,sp"
    opt="$opt,$par,zero=1,dp-overlap"
    [ "$tpo" = 1 ] && opt="$opt,tp-overlap"
    opt="$opt,precision=fp8,fp8-cache"
    [ "$vp" -gt 1 ] && opt="$opt,schedule=interleaved:$vp"
    [ "$pp" -gt 1 ] && [ "$vp" -eq 1 ] && opt="$opt,schedule=1f1b"
    # Megatron-Core's even split: L / (pp x vp) blocks a model chunk (5 trainsim layers a
    # block), the embedding (1 layer) in the first chunk, the final norm and logits (2) in the last.
    if [ "$pp" -gt 1 ]; then
      L=$(awk '$1 == "layers" { print $3 }' "$(model_path "$model")")
      opt="$opt,stages=$(awk -v c=$((pp * vp)) -v L="$L" 'BEGIN {
        k = L / c; for (i = 1; i <= c; i++) { n = 5 * k + (i == 1 ? 1 : 0) + (i == c ? 2 : 0)
        s = s (i > 1 ? ":" : "") n } print s }')"
    fi
    echo "NeMo 24.07 H100 FP8,dgx-h100-64node,dim.net.size=$nodes,$model,\"$opt\",$B,$mb,25,$t,$tok,$tflops,$n"
  done <<TABLE
models/nemo-gpt3-5b.ini 64 2048 4 2048 1 1 1 1 0 23406 765 none
models/nemo-gpt3-20b.ini 64 256 2 2048 2 1 1 1 1 5851 750 none
models/nemo-gpt3-175b.ini 128 256 1 2048 4 8 1 6 0 716 771 none
models/nemo-gpt3-175b.ini 512 2048 2 2048 4 8 1 6 0 825 888 none
models/llama2-7b.ini 8 128 1 4096 1 1 1 1 0 16934 780 none
llama2-13b 16 128 1 4096 1 4 1 10 0 8715 760 none
llama2-70b 64 128 1 4096 4 4 1 20 1 1728 768 none
llama3-8b 8 128 1 8192 1 1 2 1 0 12273 711 none
llama3-70b 64 128 1 8192 4 4 2 5 1 1524 734 none
models/nemotron4-8b.ini 64 256 4 4096 2 1 1 1 1 12507 643 none
models/nemotron4-22b.ini 64 256 2 4096 2 4 1 10 1 4312 562 none
models/nemotron4-340b.ini 128 32 1 4096 8 8 1 12 0 326 686 selective
TABLE
} >nemo-24.07-h100-fp8.csv
