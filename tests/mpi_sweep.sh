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
# A rank that fails alone (here rank 1's --output-dir is a file; rank 0's is fine) stops the
# whole job with exit 2 and one line from rank 0, instead of leaving rank 0 waiting for it.
touch "$tmp/file"
set +e
timeout 60 "$mpiexec" --oversubscribe -np 1 "$bin" sweep -t tpu-v3-8x8 -m bert-large -b 512 \
  -s tp=1 -o "$tmp/fine" : -np 1 "$bin" sweep -t tpu-v3-8x8 -m bert-large -b 512 -s tp=1 \
  -o "$tmp/file" > "$tmp/alone.out" 2> "$tmp/alone.err"
rc=$?
set -e
[ "$rc" -ne 124 ] || { echo "a rank failing alone left the job hanging"; exit 1; }
[ "$rc" -ne 0 ] || { echo "a rank failing alone: the job exited 0"; exit 1; }
grep -q "another MPI rank of this job could not prepare the sweep" "$tmp/alone.err" ||
  { echo "no one-line error from rank 0: $(cat "$tmp/alone.err")"; exit 1; }
[ ! -e "$tmp/fine" ] || { echo "rank 0 left its new output folder behind"; exit 1; }
echo "mpi sweep: identical to a local sweep; $(grep 'MPI ranks' "$tmp/out")"
