#!/bin/sh
# convert.sh: writes MaxText's published TPU training performance (PROVENANCE.txt: the MFU
# tables of MaxText/configs/{v4,v5e,v5p}/README.md and the tokens/s of
# docs/reference/models/tiering.md, copied into published.csv) as the trainsim measurement file
# maxtext-tpu.csv (docs/accuracy.md, "Measurement files"), and the MaxText synthetic models
# (the 2023 base configuration scaled by global_parameter_scale) under models/.
# Rerun after changing the mapping; the outputs are committed.
#
#   data/published/maxtext/convert.sh && ./build/sim/trainsim validate \
#       --against data/published/maxtext/maxtext-tpu.csv
#
# Step time. MaxText prints TFLOP/s per device = (TFLOP per device per step) / (step time),
# and MFU = that / the chip's peak (v4 275, v5e 197, v5p 459 TFLOP/s). So
#   step_time_s = TFLOP_per_device_per_step / (MFU x peak)
# with TFLOP per device per step as train.py computed it at the commit that published the
# tables (76bd53b0f, MaxText/train.py calculate_training_tflops, after PaLM's Appendix B):
#   6 N S b  +  6 H L d S^2 b    (the second term: 12 H L d S^2 b / 2, causal attention)
# N the parameters of the model (every array of the parameter tree, embedding included), S the
# sequence, b the per-device batch, H heads, L layers, d the head width. Rows from
# tiering.md give tokens/s per device instead: step_time_s = b S / (tokens/s per device).
#
# Split. MaxText's mesh of those launch scripts: ici_fsdp_parallelism (FSDP: parameters,
# gradients and optimizer state sharded over the axis, each layer's weights all-gathered
# before its forward and backward, gradients reduce-scattered) is dp=N,zero=3; the tensor axis
# ici_tensor_parallelism is tp (MaxText's tensor axis shards heads and the MLP width as
# Megatron's tp does). The global batch is per_device_batch_size x chips (MaxText counts every
# device, tensor-parallel ones included), in one micro-batch per replica (no gradient
# accumulation). remat_policy: full (nothing saved, every layer's forward recomputed) is
# recompute=full; minimal (jax checkpoint_dots_with_no_batch_dims: the weight matmuls' outputs
# the backward reads saved, the attention kernel and the element-wise work recomputed) is
# recompute=dots (docs/splits.md; Megatron's selective keeps every element-wise output too,
# 1.8x the bytes: the v5p rows did not fit); save_dot_except_mlpwi (minimal without the MLP's
# input matmuls wi_0/wi_1, which run again: MaxText's decoders.py) is recompute=dots:except-mlpwi;
# so are the "custom" policies of the v6e Llama 3.1 recipes, which save (offload to host) the
# attention's q/k/v projections (8B: and out_proj) and the layer input and recompute the rest:
# the same set for 8B, for 70B all but out_proj, which is recomputed there (about 2% of the step;
# before December 2026 all three were written recompute=full, the nearer of none and full).
# The attention kernels' blocks (attn-block=, the larger of query and key block in each pass):
# the tiering recipes (benchmarks/maxtext_trillium_model_configs.py at 92e59fdf5) set them, the
# Llama 3.1 8B and 70B ones to 2048 for every sa_block_* (attn-block=2048), the Llama 2 70B one
# sa_block_q 1024 and sa_block_q_dkv = sa_block_q_dq = 2048 with the keys at base.yml's 512
# (attn-block=1024:2048); the v5p Llama 2 recipe keeps base.yml's 512 (the default). The 2023
# scripts' flash_attention (layers/attentions.py at 76bd53b0f) runs blocks of 512 except the dq
# kernel's 1,024 queries (3 of the backward's 7 block matmuls), left at the default 512.
# The Llama 3.1 recipes also set sa_use_fused_bwd_kernel (one backward kernel for dQ, dK and dV:
# attn-bwd=fused); every other run uses separate dQ and dK/dV kernels (the default).
# Every launch
# script enables XLA's asynchronous collective fusion (--xla_tpu_enable_async_collective_fusion,
# --xla_tpu_overlap_compute_collective_tc), which overlaps the tensor-parallel collectives with
# the matmuls, and XLA's SPMD partitioner decomposes every all-gather that feeds a dot
# (collective matmul, Wang et al. 2023), the backward's included: tp-overlap=xla wherever
# tp > 1 (docs/splits.md). MaxText's logical axis rules shard the activations
# between layers over the tensor axis too (activation_embed -> tensor), so a layer's input is
# all-gathered over tp before its first matmul and its output reduce-scattered after the last,
# and only the shard is kept: Megatron's sequence parallelism, sp wherever tp > 1 (without it
# the 512B and 1024B rows would keep 326 GiB of layer inputs per chip on a 95 GiB chip).
# Fit and held-out rows (column set): within each chip's rows, in published order, the 1st,
# 3rd, 5th, ... are fitted and the others held out (bench/fit_tpu.sh).
# Machines (chips = TensorCores / 2 on v4 and v5p, whose slice names count cores): v4-128 = 64
# chips (4x4x4), v4-384 = 192 (4x4x12); v5e-256 = v6e-256 = 256 chips (16x16);
# v5p-128 = 64 (4x4x4), v5p-256 = 128 (4x4x8), v5p-512 = 256 (4x8x8), v5p-1024 = 512 (8x8x8),
# v5p-2048 = 1024 (8x8x16), v5p-4096 = 2048 (8x16x16).
# Multi-slice rows (2x, 4x, ... slices over the data-centre network) are not converted:
# trainsim's TPU topologies have no DCN dimension with a published bandwidth.
set -eu
cd "$(dirname "$0")"
M=../../../models
# MaxText 2023 synthetic model (base.yml at 76bd53b0f: emb 2560, 8 heads of 256, MLP 8192 with
# ReLU, 16 layers, vocabulary 32,768, logits through the embedding, RMSNorm, rotary, no biases),
# scaled as pyconfig.get_individual_scales does: for log2(scale) = 3q + r, heads and MLP x 2^(q
# + (r > 0)), emb x 2^(q + (r > 1)), layers x 2^q.
synth() { # $1 file, $2 name, $3 emb, $4 heads, $5 mlp, $6 layers
  cat > "$M/$1.ini" <<EOM
# MaxText's synthetic $2 model (github AI-Hypercomputer/maxtext, MaxText/configs/base.yml at
# commit 76bd53b0f, Dec 2023, scaled by the launch script's global_parameter_scale or base_*
# keys; data/published/maxtext/convert.sh writes this file): base_emb_dim $3, $4 heads of
# head_dim 256, base_mlp_dim $5 with mlp_activations ["relu"] (two matrices), $6 decoder layers,
# vocab_size 32,768, logits_via_embedding True (tied), RMSNorm, rotary positions, no biases,
# dropout_rate 0. The model of MaxText's published TPU v4/v5e/v5p MFU tables.
[model]
name = MaxText $2
kind = transformer
dtype = bf16

[transformer]
layers = $6
hidden = $3
heads = $4
kv_channels = 256
ffn_hidden = $5
activation = relu
sequence = 2048
vocab = 32768
position_embedding = rotary
tied_embeddings = true
norm_type = rms
bias = false
dropout = false
EOM
}
synth maxtext-22b "22B (v4)" 6144 24 24576 48
synth maxtext-52b "52B (v4)" 12288 32 49152 32
synth maxtext-16b "16B" 5120 32 32768 32
synth maxtext-32b "32B" 10240 32 32768 32
synth maxtext-64b "64B" 10240 32 32768 64
synth maxtext-128b "128B" 10240 64 65536 64
synth maxtext-256b "256B" 20480 64 65536 64
synth maxtext-512b "512B" 20480 64 65536 128
synth maxtext-1024b "1024B" 20480 128 131072 128

# published.csv: one row per published table line (single slice), as published:
#   source,chip,slice,model,topology,vary,split,per_device_batch,chips,mfu_pct,tokens_per_s_per_device
awk -F, '
  BEGIN { peak["v4"] = 275; peak["v5e"] = 197; peak["v5p"] = 459; peak["v6e"] = 918
    # model: emb heads mlp layers vocab seq kv_heads gated(1) tied(1) head_dim
    d["maxtext-22b"] = "6144 24 24576 48 32768 2048 24 0 1 256"
    d["maxtext-52b"] = "12288 32 49152 32 32768 2048 32 0 1 256"
    d["maxtext-16b"] = "5120 32 32768 32 32768 2048 32 0 1 256"
    d["maxtext-32b"] = "10240 32 32768 32 32768 2048 32 0 1 256"
    d["maxtext-64b"] = "10240 32 32768 64 32768 2048 32 0 1 256"
    d["maxtext-128b"] = "10240 64 65536 64 32768 2048 64 0 1 256"
    d["maxtext-256b"] = "20480 64 65536 64 32768 2048 64 0 1 256"
    d["maxtext-512b"] = "20480 64 65536 128 32768 2048 64 0 1 256"
    d["maxtext-1024b"] = "20480 128 131072 128 32768 2048 128 0 1 256"
    d["llama2-70b"] = "8192 64 28672 80 32000 4096 8 1 0 128"
    d["llama3-8b"] = "4096 32 14336 32 128256 8192 8 1 0 128"
    d["llama3-70b"] = "8192 64 28672 80 128256 8192 8 1 0 128"
    print "# written by convert.sh from published.csv (PROVENANCE.txt); step_time_s derived there"
    print "group,topology,vary,model,split,global_batch,micro_batch,step_time_s,set,source"
  }
  /^#/ || /^source,/ { next }
  {
    src = $1; chip = $2; model = $4; topo = $5; vary = $6; sp = $7; b = $8; chips = $9
    mfu = $10; tps = $11
    split(d[model], p, " ")
    e = p[1]; H = p[2]; f = p[3]; L = p[4]; V = p[5]; S = p[6]; K = p[7]; g = p[8]; tied = p[9]
    hd = p[10]
    if (mfu != "") {
      N = L * (e * H * hd * 2 + 2 * e * K * hd + (2 + g) * e * f + 2 * e) + V * e * (2 - tied) + e
      tf = 6 * N * S * b + 6 * H * L * hd * S * S * b
      t = tf / (mfu / 100 * peak[chip] * 1e12)
    } else t = b * S / tps
    gsub(/;/, ",", sp)
    set = (seen[chip]++ % 2 == 0) ? "fit" : "held-out"
    printf "%s,%s,%s,%s,\"%s\",%d,%d,%.4f,%s,%s %s\n", "TPU " chip, topo, vary, model, sp, \
      b * chips, b * chips / (chips / (sp ~ /tp=/ ? tpdeg(sp) : 1)), t, set, src, $3
  }
  function tpdeg(s,   m) { return match(s, /tp=[0-9]+/) ? substr(s, RSTART + 3, RLENGTH - 3) : 1 }
' published.csv > maxtext-tpu.csv
