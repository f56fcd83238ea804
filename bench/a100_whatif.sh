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
#   bench/a100_whatif.sh                                   # the shipped profile
#   bench/a100_whatif.sh collective_launch_us=30 kernel_launch_us=60
#
# The profile in the repository is not modified: the replays run on a copy in a temporary
# folder.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
for kv in "$@"; do
  case "$kv" in
  [a-z]*=[0-9.]*) ;;
  *) echo "a100_whatif.sh: argument '$kv': expected KEY=NUMBER (an A100 [chip] key)" >&2; exit 2 ;;
  esac
done
cmake -S . -B build >/dev/null
cmake --build build -j2 --target trainsim >/dev/null
ts="$root/build/sim/trainsim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/chips"
prof="$tmp/chips/a100-sxm4-80gb.ini"
cp topologies/chips/a100-sxm4-80gb.ini "$prof"
for kv in "$@"; do
  k=${kv%%=*} v=${kv#*=}
  if grep -q "^$k = " "$prof"; then
    sed -i "s/^$k = .*/$k = $v/" "$prof"
  else
    sed -i "s/^\[chip\]\$/[chip]\n$k = $v/" "$prof"
  fi
done
printf "%-30s %5s  %13s  %s\n" "file" "rows" "mean |error|" "bias"
for f in vtrain/megatron-single vtrain/megatron-multi megatron/narayanan2021-table1 \
  megatron/korthikanti2022-table4; do
  dir=${f%%/*}
  # The rows' topologies, copied beside the modified profile; their model paths made absolute.
  for t in $(grep -v '^#' "data/published/$f.csv" | grep -o ',dgx-a100-[0-9a-z-]*,' | tr -d , | sort -u); do
    cp "topologies/$t.ini" "$tmp/"
  done
  sed -e 's/,\(dgx-a100-[0-9a-z-]*\),/,\1.ini,/' -e "s|,models/|,$root/data/published/$dir/models/|" \
    "data/published/$f.csv" >"$tmp/rows.csv"
  (cd "$tmp" && "$ts" validate --against rows.csv --format csv -j 2 2>/dev/null) |
    awk -v name="${f#*/}" "$(cat bench/csv_fields.awk)"'
      NR == 1 { n = fields($0, h); for (i = 1; i <= n; i++) if (h[i] == "error_pct") c = i; next }
      { fields($0, x); e = x[c] + 0; a += e < 0 ? -e : e; s += e; k++ }
      END { printf "%-30s %5d  %12.2f%%  %+.2f%%\n", name, k, a / k, s / k }'
done
