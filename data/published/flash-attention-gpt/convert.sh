#!/bin/sh
# convert.sh: writes the model files (models/) and the two measurement files of this folder
# (docs/accuracy.md, "FlashAttention's GPT-3 training runs on 8 A100s") from the published
# numbers below (PROVENANCE.txt says where each comes from). Run from anywhere; rewrites
# models/*.ini, dao2022-training-readme.csv, dao2023-fa2-table1.csv and dao2022-owt-step-time.csv
# beside this script.
#
# 1. training/README.md of github Dao-AILab/flash-attention (commit 4a6eaa9f2, 2022-11-29),
#    "Training speed": throughput in tokens/s on 8 A100 80GB at a batch of 0.5M or 1M tokens.
#    step_time_s = tokens a step / tokens/s (no FLOP count involved).
# 2. Dao 2023, FlashAttention-2 (arXiv 2307.08691), Table 1: TFLOP/s per GPU on 8 A100 80GB.
#    The training README states the count its TFLOP/s use: Megatron-LM's (Narayanan et al.
#    2021, section 5.1) scaled by 3/4 (model FLOPs, no recomputation), per token
#        F = 72 l h^2 (1 + s / (6 h) + V / (16 l h)),   V = 50257,
#    so step_time_s = F x tokens a step / (X x 1e12 x 8). PROVENANCE.txt says why this count
#    and not the paper's text formula (6 s N + 12 l h s^2 a sequence) was chosen.
# 3. training/configs/experiment/owt/base.yaml of the same repository (commit 0bf5e5003,
#    2022-11-28): "for GPT2-small time per global step (i.e. batch size 512) on 8 A100s goes
#    from 376ms to 368ms. For GPT2-medium time per global goes from 997ms to 972ms" (apex's
#    FusedAdam, the optimizer the config sets): step times as published.
set -eu
cd "$(dirname "$0")"

# model NAME LABEL LAYERS HIDDEN HEADS SEQ [DTYPE]: the GPT model of flash_attn.models.gpt as
# the training configs build it (PROVENANCE.txt); DTYPE bf16 (the Pile configs) or fp16 (the
# OpenWebText configs' precision 16).
model() {
  h=$4
  params=$((12 * h * h * $3 + 13 * h * $3 + 2 * h + 50264 * h + $6 * h))
  cat > "models/$1.ini" <<MODEL
# $2 as FlashAttention's training scripts build it (github Dao-AILab/flash-attention,
# training/configs/experiment/, flash_attn.models.gpt.GPTLMHeadModel on transformers'
# GPT2Config): $3 layers, hidden $4, $5 heads, MLP 4 x hidden with GELU, learned positions
# ($6 rows), biases, pre-LayerNorm, tied embeddings, dropout 0.1 (GPT2Config's default), the
# GPT-2 vocabulary 50,257 padded to a multiple of 8 (pad_vocab_size_multiple: 8).
# $params parameters (12 h^2 l + 13 h l + 2 h + 50264 h + $6 h; no count is published).
# Written by convert.sh.
[model]
name = $2 seq $6
kind = transformer
dtype = ${7:-bf16}

[transformer]
layers = $3
hidden = $4
heads = $5
ffn_hidden = $((4 * h))
sequence = $6
vocab = 50264
position_embedding = learned
tied_embeddings = true
norm = pre
bias = true
dropout = true
MODEL
}
model gpt3-125m-seq2048 "GPT3-125M" 12 768 12 2048
model gpt3-355m-seq2048 "GPT3-355M" 24 1024 16 2048
model gpt3-760m-seq2048 "GPT3-760M" 24 1536 16 2048
model gpt3-1.3b-seq2048 "GPT3-1.3B" 24 2048 16 2048
model gpt3-1.3b-seq8192 "GPT3-1.3B" 24 2048 16 8192
model gpt3-2.7b-seq2048 "GPT3-2.7B" 32 2560 20 2048
model gpt3-2.7b-seq8192 "GPT3-2.7B" 32 2560 20 8192
model gpt2-small-seq1024 "GPT2-small" 12 768 12 1024 fp16
model gpt2-medium-seq1024 "GPT2-medium" 24 1024 16 1024 fp16

# split ZERO: the data-parallel setup of the configs. Without a strategy (125M, 355M) Lightning's
# DDP with torch's defaults: 25 MB buckets copied from the gradients (buckets=copy); with
# DDPStrategyZero1 (760M and up) torch's ZeroRedundancyOptimizer (zero=1) and
# gradient_as_bucket_view: True (buckets=view). No activation checkpointing, fused kernels.
split() {
  if [ "$1" = 0 ]; then
    echo "dp=8,buckets=copy,attn-kernel=$2"
  else
    echo "dp=8,zero=1,buckets=view,attn-kernel=$2"
  fi
}

{
  echo "# FlashAttention's training README (github Dao-AILab/flash-attention 4a6eaa9f2, training/README.md,"
  echo "# \"Training speed\"): GPT3 on 8 A100 80GB SXM4 with FlashAttention (1), bf16, no recomputation."
  echo "# step_time_s = tokens a step / published tokens/s (convert.sh). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,step_time_s,published_tokens_per_s,seq_len_tokens,gpus"
  # model  zero  global_batch  micro_batch  tokens/s
  while read -r m z gb mb tps; do
    t=$(awk -v gb="$gb" -v tps="$tps" 'BEGIN { printf "%.6g", gb * 2048 / tps }')
    echo "README FA1 2k,dgx-a100-1node,,models/$m.ini,\"$(split "$z" fa1)\",$gb,$mb,$t,$tps,2048,8"
  done <<ROWS
gpt3-125m-seq2048 0 256 32 1310000
gpt3-355m-seq2048 0 256 32 503000
gpt3-760m-seq2048 1 256 16 245000
gpt3-1.3b-seq2048 1 512 8 169000
gpt3-2.7b-seq2048 1 512 4 85000
ROWS
} > dao2022-training-readme.csv

{
  echo "# Dao 2023, FlashAttention-2 (arXiv 2307.08691), Table 1: GPT3-1.3B/2.7B at 2k/8k on 8 A100 80GB"
  echo "# SXM4, TFLOP/s per GPU. step_time_s = 72 l h^2 (1 + s/(6h) + V/(16 l h)) x tokens / (TFLOP/s x"
  echo "# 1e12 x 8), V = 50257 (the training README's count; convert.sh). The FlashAttention column at 2k"
  echo "# is the README's measurement (dao2022-training-readme.csv), left out here. Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,step_time_s,published_tflops_per_gpu,seq_len_tokens,gpus,layers,hidden"
  # group  model  layers hidden seq  global_batch micro_batch kernel TFLOP/s
  while read -r g m l h s gb mb k x; do
    t=$(awk -v l="$l" -v h="$h" -v s="$s" -v gb="$gb" -v x="$x" 'BEGIN {
      f = 72 * l * h * h * (1 + s / (6 * h) + 50257 / (16 * l * h));
      printf "%.6g", f * gb * s / (x * 1e12 * 8) }')
    echo "$g,dgx-a100-1node,,models/$m.ini,\"$(split 1 "$k")\",$gb,$mb,$t,$x,$s,8,$l,$h"
  done <<ROWS
FA2 gpt3-1.3b-seq2048 24 2048 2048 512 8 fa2 196
FA2 gpt3-1.3b-seq8192 24 2048 8192 128 4 fa2 220
FA2 gpt3-2.7b-seq2048 32 2560 2048 512 4 fa2 205
FA2 gpt3-2.7b-seq8192 32 2560 8192 128 4 fa2 225
FA1-8k gpt3-1.3b-seq8192 24 2048 8192 128 4 fa1 170
FA1-8k gpt3-2.7b-seq8192 32 2560 8192 128 4 fa1 175
ROWS
} > dao2023-fa2-table1.csv

{
  echo "# FlashAttention's OpenWebText configs (github Dao-AILab/flash-attention 0bf5e5003,"
  echo "# training/configs/experiment/owt/base.yaml, a comment): time per global step of 512 x 1024"
  echo "# tokens on 8 A100s with apex FusedAdam, GPT2-small 368 ms, GPT2-medium 972 ms; fp16,"
  echo "# FlashAttention (1), no recomputation. ASSUMED: A100 80GB (PROVENANCE.txt). Held out: never fitted."
  echo "group,topology,vary,model,split,global_batch,micro_batch,step_time_s,seq_len_tokens,gpus"
  echo "OWT FA1 1k,dgx-a100-1node,,models/gpt2-small-seq1024.ini,\"$(split 0 fa1)\",512,64,0.368,1024,8"
  echo "OWT FA1 1k,dgx-a100-1node,,models/gpt2-medium-seq1024.ini,\"$(split 0 fa1)\",512,32,0.972,1024,8"
} > dao2022-owt-step-time.csv
