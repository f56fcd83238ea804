#!/usr/bin/env bash
# MPI sweep test (registered by tests/CMakeLists.txt when MPI is found): one sweep spread over
# two ranks must write exactly the files a local sweep writes, and rank 1 must have done work.
# Usage: tests/mpi_sweep.sh MPIEXEC TRAINSIM
set -euo pipefail
mpiexec=$1 bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
args=(-t tpu-v3-8x8,asym-16x16 -m bert-large -b 512 -s tp=1 -s tp=4@x -s tp=8@y
      -s tp=2@x,pp=2@y --vary link_bandwidth_GBps=x0.5,x1,x2)
"$mpiexec" --oversubscribe -np 2 "$bin" sweep "${args[@]}" -o "$tmp/mpi" > "$tmp/out"
"$bin" sweep "${args[@]}" --jobs 1 -o "$tmp/local" > /dev/null
cmp "$tmp/mpi/sweep.csv" "$tmp/local/sweep.csv"
cmp "$tmp/mpi/sweep.json" "$tmp/local/sweep.json"
grep -q "across 2 MPI ranks" "$tmp/out" || { echo "no MPI summary: $(cat "$tmp/out")"; exit 1; }
if grep -q "rank 1 predicted 0" "$tmp/out"; then
  echo "rank 1 did no work: $(cat "$tmp/out")"; exit 1
fi
echo "mpi sweep: identical to a local sweep; $(grep 'MPI ranks' "$tmp/out")"
