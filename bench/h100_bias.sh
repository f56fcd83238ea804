#!/bin/sh
# h100_bias.sh: where the H100 / H200 step-time bias sits. Replays every H100 / H200 step-time
# file (the eleven of docs/accuracy.md "At a glance"; `trainsim validate --against --format csv`)
# and pools their rows by the stack that ran them (FSDP1: MosaicML's Composer; FSDP2: TorchTitan;
# Megatron: NeMo, Megatron-Core, Megatron-Bridge and Meta's Llama 3), by file, precision,
# attention kernel, the predicted share of the step in the attention core, and GPUs (the
# product of the split's degrees). A share is read off the replay itself: each row again with
# that part at half its rate (`flash_efficiency=x0.5`; `compute_efficiency=x0.5`, GEMMs and core;
# `memory_bandwidth_GBps=x0.5`, memory-bound ops, in the row's vary), the step's growth over the
# shipped step being that part's time (the GEMM share is the compute one less the core's); for
# communication, every link of the node and the network at half its rate: the growth is the
# exposed communication's share (NCCL's SMs taken from compute included) and what halving exposes.
# Prints per class the rows, the mean signed error (the bias) and the mean |error|, then the
# correlation of the signed error with each share per stack (docs/accuracy.md, "The H100 bias,
# pooled").
#
#   bench/h100_bias.sh           # ~80 s on 2 cores: five validate runs per file
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_build
bench_tmp
files=$(h100_step_files)
hdr='group,topology,vary,model,split,global_batch,micro_batch,step_time_s'
for k in att cmp mem net; do echo "$hdr" > "$tmp/$k.csv"; done
: > "$tmp/rows.tsv"
for file in $files; do
  bench_validate "$tmp/v.csv" --against "$file" --format csv -j 2
  # One line a row (key, stack, file, precision, kernel, signed error), and the row again in
  # three copies with one part at half its rate, measured = the shipped prediction, so that a
  # copy's error is that part's share of the step in percent. Files beside the measurement file
  # get its folder (validate looks there first).
  awk -v file="$file" -v dir="$root/$(dirname "$file")" -v tmp="$tmp" "$(cat bench/csv_fields.awk)"'
    function here(p,    ok) { if (p !~ /\.ini$/) return p; ok = (getline x < (dir "/" p)) >= 0; close(dir "/" p); return ok ? dir "/" p : p }
    NR == 1 { next }
    {
      fields($0, f); key = file "#" f[1]
      stack = file ~ /llm-foundry/ ? "FSDP1" : file ~ /torchtitan/ ? "FSDP2" : "Megatron"
      prec = f[6] ~ /precision=fp8/ ? "fp8" : "bf16"
      kern = f[6] ~ /attn-kernel=cudnn/ ? "cudnn" : "fa2"
      n = split(file, p, "/"); name = p[n]
      # GPUs: the product of the split axes degrees
      g = 1; rest = f[6]
      while (match(rest, /(^|,)(dp|tp|pp|cp)=[0-9]+/)) {
        d = substr(rest, RSTART, RLENGTH); sub(/.*=/, "", d); g *= d; rest = substr(rest, RSTART + RLENGTH) }
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", key, stack, name, prec, kern, f[13], g >> (tmp "/rows.tsv")
      topo = here(f[3]); model = here(f[5]); v = f[4] == "" ? "" : f[4] ";"
      line = "\"" f[6] "\"," f[7] "," f[8] "," f[12]
      print key "," topo "," v "flash_efficiency=x0.5," model "," line >> (tmp "/att.csv")
      print key "," topo "," v "compute_efficiency=x0.5," model "," line >> (tmp "/cmp.csv")
      print key "," topo "," v "memory_bandwidth_GBps=x0.5," model "," line >> (tmp "/mem.csv")
      print key "," topo "," v "dim.node.link_bandwidth_GBps=x0.5;dim.net.link_bandwidth_GBps=x0.5," model "," line >> (tmp "/net.csv")
    }' "$tmp/v.csv"
done
for k in att cmp mem net; do
  bench_validate "$tmp/$k.out" --against "$tmp/$k.csv" --format csv -j 2
done
awk -F'\t' "$(cat bench/csv_fields.awk)"'
  function add(c, e) { if (!(c in n)) order[++nc] = c; n[c]++; s[c] += e; a[c] += e < 0 ? -e : e }
  function r(k, x, y) {   # correlation of the signed error with share x over the rows of class k
    return (sxx[k, x] * cnt[k] - sx[k, x] ^ 2) > 0 ? (sxy[k, x] * cnt[k] - sx[k, x] * sy[k]) / \
      sqrt((sxx[k, x] * cnt[k] - sx[k, x] ^ 2) * (syy[k] * cnt[k] - sy[k] ^ 2)) : 0
  }
  FILENAME ~ /\.out$/ { if (FNR == 1) next; fields($0, f); k = FILENAME; sub(/.*\//, "", k); sub(/\.out$/, "", k)
    share[f[2], k] = f[13] / 100; next }
  {
    key = $1; e = $6 + 0; att = share[key, "att"]; gemm = share[key, "cmp"] - att; mem = share[key, "mem"]; net = share[key, "net"]
    add("all H100/H200 rows", e); add("stack " $2, e); add("file " $3, e)
    add("precision " $4 " (" ($2 == "FSDP1" ? "FSDP1" : "others") ")", e); add("kernel " $5 " (" ($2 == "FSDP1" ? "FSDP1" : "others") ")", e)
    b = att < 0.05 ? "0.00-0.05" : att < 0.1 ? "0.05-0.10" : att < 0.2 ? "0.10-0.20" : att < 0.35 ? "0.20-0.35" : "0.35-1"
    add("core share " b " (" ($2 == "FSDP1" ? "FSDP1" : "others") ")", e)
    g = $7 <= 8 ? "   8" : $7 <= 64 ? "  16-64" : $7 <= 512 ? " 128-512" : "1024+"
    add("GPUs " g " (" ($2 == "FSDP1" ? "FSDP1" : "others") ")", e)
    for (j = 1; j <= 2; j++) {
      k = j == 1 ? "all" : $2; if (j == 2 && $2 == "all") continue
      cnt[k]++; sy[k] += e; syy[k] += e * e
      x["core"] = att; x["gemm"] = gemm; x["memory"] = mem; x["net"] = net
      for (q in x) { sx[k, q] += x[q]; sxx[k, q] += x[q] ^ 2; sxy[k, q] += x[q] * e; ms[k, q] += x[q] }
    }
  }
  END {
    printf "%-44s %5s %10s %13s\n", "class", "rows", "bias", "mean |error|"
    # by section, each sorted by name
    ns = split("all,stack,file,precision,kernel,core share,GPUs", sec, ",")
    for (j = 1; j <= ns; j++) {
      m = 0
      for (i = 1; i <= nc; i++) if (index(order[i], sec[j]) == 1) { l[++m] = order[i]
        for (q = m; q > 1 && l[q] < l[q - 1]; q--) { t = l[q]; l[q] = l[q - 1]; l[q - 1] = t } }
      for (i = 1; i <= m; i++) { c = l[i]; printf "%-44s %5d %+9.1f%% %12.1f%%\n", c, n[c], s[c] / n[c], a[c] / n[c] }
    }
    printf "\ncorrelation of the signed error with the predicted share of the step (mean share)\n"
    printf "%-10s %5s %16s %16s %16s %16s\n", "stack", "rows", "attention core", "GEMMs", "memory-bound", "communication"
    split("all FSDP1 FSDP2 Megatron", ks, " ")
    for (i = 1; i <= 4; i++) { k = ks[i]
      printf "%-10s %5d %+8.2f (%.2f) %+9.2f (%.2f) %+9.2f (%.2f) %+9.2f (%.2f)\n", k, cnt[k], r(k, "core"), ms[k, "core"] / cnt[k],
        r(k, "gemm"), ms[k, "gemm"] / cnt[k], r(k, "memory"), ms[k, "memory"] / cnt[k], r(k, "net"), ms[k, "net"] / cnt[k] }
  }' "$tmp/att.out" "$tmp/cmp.out" "$tmp/mem.out" "$tmp/net.out" "$tmp/rows.tsv"
