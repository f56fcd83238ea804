#!/bin/sh
# a100_whatif.sh: what the A100 Megatron files say about a change of the A100 profile, before it
# is made. Replays vTrain's single- and multi-node Megatron-DeepSpeed rows, Narayanan et al.
# 2021's Table 1 and Korthikanti et al. 2022's Table 4 (`trainsim validate --against`) with the
# given [chip] keys of topologies/chips/a100-sxm4-80gb.ini replaced (or added), and prints each
# file's mean |error| and mean signed error to two decimals (`bench/accuracy.sh` prints one).
# The vTrain files are the A100 profile's fitting data; the Megatron-LM ones are held out, and
# a change that helps the first and hurts the second is the pattern docs/accuracy.md's vTrain
# sections keep finding.
#
# An argument net.KEY=NUMBER sets KEY in the [dim.net] group of the DGX A100 topologies instead
# (the InfiniBand network's NCCL keys; docs/collectives.md), node.KEY=NUMBER in [dim.node] (the
# NVSwitch node's). With --multi-node first, the
# multi-node A100 files the profile was not fitted to are replayed too: MT-NLG, OPT-175B,
# GPT-NeoX-20B, NeMo-Megatron's GPT-3 5B on 1-32 nodes and TorchTitan's A100 FSDP rows.
#
#   bench/a100_whatif.sh                                   # the shipped profile
#   bench/a100_whatif.sh collective_launch_us=30 kernel_launch_us=60
#   bench/a100_whatif.sh --multi-node net.nccl_node_hop_latency_us=1.062
#
# The profile and topologies in the repository are not modified: the replays run on copies in a
# temporary folder.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
files="vtrain/megatron-single vtrain/megatron-multi megatron/narayanan2021-table1
megatron/korthikanti2022-table4"
if [ "${1:-}" = --multi-node ]; then
  shift
  files="$files mtnlg/smith2022-mtnlg opt/zhang2022-opt175b gpt-neox/black2022-neox20b
nemo-launcher/nemo-launcher-5b-a100 torchtitan/performance_a100_steps"
fi
# KEY is a key name and NUMBER a number: anything else went into sed and awk as text
# ("compute_efficiency=1/2" broke the sed expression).
for kv in "$@"; do
  case "$kv" in
  *=*=* | [!a-z]* | *[!a-zA-Z0-9_.]*=* | *=*[!0-9.eE+-]*) ok=no ;;
  [a-z]*=[0-9.]*) ok=yes ;;
  *) ok=no ;;
  esac
  case $ok in
  yes) ;;
  *)
    echo "a100_whatif.sh: argument '$kv': expected KEY=NUMBER (an A100 [chip] key)," \
      "net.KEY=NUMBER or node.KEY=NUMBER (a DGX A100 [dim.net] or [dim.node] key)" >&2
    exit 2
    ;;
  esac
done
bench_build
bench_tmp
mkdir -p "$tmp/chips"
prof="$tmp/chips/a100-sxm4-80gb.ini"
cp topologies/chips/a100-sxm4-80gb.ini "$prof"
for kv in "$@"; do
  k=${kv%%=*} v=${kv#*=}
  case "$k" in net.* | node.*) continue ;; esac
  if grep -q "^$k = " "$prof"; then
    sed -i "s/^$k = .*/$k = $v/" "$prof"
  else
    sed -i "s/^\[chip\]\$/[chip]\n$k = $v/" "$prof"
  fi
done
printf "%-30s %5s  %13s  %s\n" "file" "rows" "mean |error|" "bias"
# A [dim.net] or [dim.node] key of a copied topology: replaced where the group has it, else added
# to the group.
net_keys() {
  for kv in "$@"; do
    case "$kv" in net.* | node.*) ;; *) continue ;; esac
    k=${kv%%=*} v=${kv#*=}
    d=${k%%.*} k=${k#*.}
    awk -v k="$k" -v v="$v" -v g="[dim.$d]" '
      /^\[/ { if (net && !done) { print k " = " v; done = 1 } net = ($0 == g) }
      net && index($0, k " = ") == 1 { $0 = k " = " v; done = 1 }
      { print }
      END { if (net && !done) print k " = " v }' "$t1" >"$t1.new"
    mv "$t1.new" "$t1"
  done
}
for f in $files; do
  dir=${f%%/*}
  # The rows' topologies, copied beside the modified profile; their model paths made absolute.
  for t in $(grep -v '^#' "data/published/$f.csv" | grep -o ',dgx-a100-[0-9a-z-]*,' | tr -d , | sort -u); do
    cp "topologies/$t.ini" "$tmp/"
    t1="$tmp/$t.ini"
    net_keys "$@"
  done
  sed -e 's/,\(dgx-a100-[0-9a-z-]*\),/,\1.ini,/' -e "s|,models/|,$root/data/published/$dir/models/|" \
    "data/published/$f.csv" >"$tmp/rows.csv"
  # A key the profile or topology refuses (unknown, out of range) fails the replay: say so and
  # stop, rather than print a file of 0 rows and a -nan% error.
  (cd "$tmp" && bench_validate out.csv --against rows.csv --format csv -j 2)
  awk -v name="${f#*/}" "$(cat bench/csv_fields.awk)"'
      NR == 1 { n = fields($0, h); for (i = 1; i <= n; i++) if (h[i] == "error_pct") c = i; next }
      { fields($0, x); e = x[c] + 0; a += e < 0 ? -e : e; s += e; k++ }
      END { printf "%-30s %5d  %12.2f%%  %+.2f%%\n", name, k, a / k, s / k }' "$tmp/out.csv"
done
