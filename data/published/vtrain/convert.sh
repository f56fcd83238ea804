#!/bin/sh
# convert.sh: writes vTrain's measured iteration times (ground_truth_single.csv,
# ground_truth_multi.csv, copied verbatim) as trainsim measurement files
# (docs/accuracy.md): megatron-single.csv and megatron-multi.csv, and the GPT model of each
# row's shape under models/; and the all-reduce tables (allreduce-lut/a100, allreduce-lut/v100)
# as nccl-allreduce-a100.csv and nccl-allreduce-v100.csv. Rerun after changing the mapping;
# the outputs are committed.
#
#   data/published/vtrain/convert.sh && ./build/sim/trainsim validate \
#       --against data/published/vtrain/megatron-single.csv
#
# Each row as vTrain's runs ran it (PROVENANCE.txt): Megatron-DeepSpeed GPT in fp16 with
# learned positions, tied logits, pre-norm, biases, dropout and a GeLU MLP of 4h, the
# vocabulary (50,257) padded to a multiple of 128 x tp as Megatron pads it, unfused attention
# (the runs predate flash attention in Megatron-DeepSpeed); activation checkpointing
# (recompute=full), 1F1B with blocking pipeline sends (p2p=blocking: DeepSpeed's pipeline engine
# issues each send as its own blocking instruction) and Megatron's stages (L/pp blocks each, the embedding on the first
# stage, the final norm and logits on the last), Megatron's rank order (tp innermost, then dp,
# then pp) on GPUs numbered node-major, and no gradient bucketing (bucket_MiB = 1048576);
# load=sync: each micro-batch's load synchronises the host with the device on the stages that
# load data (Megatron's broadcast_data reads the batch's sizes back with .cpu(); on every rank
# at pp = 1, on the first and last stages under DeepSpeed's pipeline engine); tp-grad=serial:
# a tensor-parallel layer's input-gradient all-reduce after its whole linear backward
# (Megatron-DeepSpeed's mpu: the all-reduce is the backward of
# copy_to_tensor_model_parallel_region, an autograd node after F.linear's; no-op at tp = 1).
# Machines: the shipped DGX A100 node cut to the row's GPUs (single), or the shipped 4-node DGX
# A100 with the row's node count and vTrain's inter-node bandwidth, 800 Gb/s per node = 12.5
# GB/s per GPU (multi).
set -eu
cd "$(dirname "$0")"
rm -f models/gpt-*.ini
convert() { # $1 input, $2 output, $3 group prefix, $4 1 = multi-node
  awk -F, -v group="$3" -v multi="$4" '
    function model(h, a, l, s, v,   f) {
      f = sprintf("models/gpt-h%d-a%d-l%d-s%d-v%d.ini", h, a, l, s, v)
      if (!(f in seen)) {
        seen[f] = 1
        printf "# GPT of vTrain'"'"'s measured runs (data/published/vtrain/convert.sh)\n" > f
        printf "[model]\nname = GPT h%d l%d (vTrain)\nkind = transformer\ndtype = fp16\n", h, l > f
        printf "attention = unfused\n[transformer]\nlayers = %d\nhidden = %d\nheads = %d\n", l, h, a > f
        printf "sequence = %d\nvocab = %d\nposition_embedding = learned\n", s, v > f
        printf "tied_embeddings = true\nnorm = pre\ndropout = true\nbias = true\nactivation = gelu\n" > f
        close(f)
      }
      return f
    }
    NR == 1 {
      print "group,topology,vary,model,split,global_batch,micro_batch,bucket_MiB,step_time_ms"
      next
    }
    NF < 11 { next }
    {
      o = NF - 11
      gpus = $(o + 1); gb = $(o + 2); mb = $(o + 3); h = $(o + 4); a = $(o + 5); l = $(o + 6)
      s = $(o + 7); tp = $(o + 8); dp = $(o + 9); pp = $(o + 10); ms = $(o + 11)
      sub(/\r$/, "", ms)
      m = 128 * tp; v = int((50257 + m - 1) / m) * m
      if (multi) {
        topo = "dgx-a100-4node"; vary = sprintf("dim.net.size=%d;dim.net.link_bandwidth_GBps=12.5", gpus / 8)
        node = 8
      } else {
        topo = "dgx-a100-1node"; vary = gpus == 8 ? "" : sprintf("dim.node.size=%d", gpus)
        node = gpus
      }
      sp = "recompute=full,load=sync,tp-grad=serial"; left = node
      n[1] = "tp"; n[2] = "dp"; n[3] = "pp"; d[1] = tp; d[2] = dp; d[3] = pp
      for (k = 1; k <= 3; k++) {
        if (d[k] <= 1) continue
        where = left == 1 ? "net" : d[k] <= left ? "node" : multi ? "node+net" : "node"
        sp = sp sprintf(",%s=%d@%s", n[k], d[k], where)
        left = d[k] <= left ? left / d[k] : 1
      }
      if (pp > 1) {
        per = 5 * (l / pp)
        sp = sp sprintf(",schedule=1f1b,p2p=blocking,stages=%d", 1 + per)
        for (k = 1; k < pp; k++) sp = sp sprintf(":%d", per + (k == pp - 1 ? 2 : 0))
      }
      g = group (pp > 1 ? " pp>1" : " pp=1")
      printf "%s,%s,%s,%s,\"%s\",%d,%d,1048576,%s\n", g, topo, vary, model(h, a, l, s, v), sp, gb, mb, ms
    }' "$1" > "$2"
}
convert ground_truth_single.csv megatron-single.csv single 0
convert ground_truth_multi.csv megatron-multi.csv multi 1
# nccl-tests all-reduce on 2-8 GPUs of one node (allreduce-lut/a100 and allreduce-lut/v100):
# the power-of-two sizes from 1 MiB to 1 GiB, busbw the mean of the two published runs. The
# V100 tables are a DGX-1V's hybrid cube-mesh (GPUs 0..n-1; topologies/dgx1-v100.ini).
nccl() { # $1 chip directory, $2 group prefix, $3 topology, $4 GPUs of the whole machine
  echo "group,topology,vary,collective,size_bytes,busbw_GBps"
  for n in 2 3 4 5 6 7 8; do
    awk -F, -v n="$n" -v chip="$2" -v topo="$3" -v all="$4" 'NR > 1 {
        mib = $1 / 1048576
        if (mib == 1 || mib == 2 || mib == 4 || mib == 8 || mib == 16 || mib == 32 || mib == 64 ||
            mib == 128 || mib == 256 || mib == 512 || mib == 1024)
          printf "%s %d GPUs,%s,%s,allreduce,%s,%.4g\n", chip, n, topo,
                 n == all ? "" : "dim.node.size=" n, $1, ($5 + $7) / 2
      }' "allreduce-lut/$1/AR_GPU${n}_1M_1024M_LUT"
  done
}
nccl a100 A100 dgx-a100-1node 8 > nccl-allreduce-a100.csv
nccl v100 V100 dgx1-v100 8 > nccl-allreduce-v100.csv
echo "wrote $(pwd)/megatron-single.csv ($(($(wc -l < megatron-single.csv) - 1)) rows)," \
  "megatron-multi.csv ($(($(wc -l < megatron-multi.csv) - 1)) rows), $(ls models | wc -l) models," \
  "nccl-allreduce-a100.csv ($(($(wc -l < nccl-allreduce-a100.csv) - 1)) rows)," \
  "nccl-allreduce-v100.csv ($(($(wc -l < nccl-allreduce-v100.csv) - 1)) rows)"
