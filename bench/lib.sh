# bench/lib.sh: the preamble the bench scripts share. Source it from the repository root, after
# `cd "$(dirname "$0")/.."`: it sets root (that folder) and ts (the trainsim program built there)
# and defines
#   bench_build [TARGET...]  configure build/ and build TARGETs (default trainsim), quietly: the
#                            script then runs on a fresh checkout too
#   bench_tmp                a fresh folder in $tmp, removed when the script exits
root=$(pwd)
ts="$root/build/sim/trainsim"

bench_build() {
  [ $# -gt 0 ] || set -- trainsim
  cmake -S . -B build >/dev/null
  cmake --build build -j2 --target "$@" >/dev/null
}

bench_tmp() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}
