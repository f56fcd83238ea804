#!/usr/bin/env bash
# Installs what trainsim needs (Debian 12 packages) when missing, then configures and builds it
# in ./build. Safe to run again: it installs nothing that is present and rebuilds incrementally.
#   ./setup.sh          install, build
#   ./setup.sh --test   install, build, run every test; then the suite again (less the tests
#                       labelled slow) in a build with AddressSanitizer and UBSan (./build-asan)
set -euo pipefail
mode=${1:-build}
case "$mode" in build|--test) ;; *) echo "usage: ./setup.sh [--test]" >&2; exit 2 ;; esac
cd "$(dirname "$0")"

# protobuf-c: the Chakra execution-trace reader (trainsim import --from chakra), generated at
# build time from third_party/chakra/et_def.proto. libopenmpi-dev and openmpi-bin: the MPI
# sweep (mpirun -np N trainsim sweep) is built and its test (tests/mpi_sweep.sh) runs; without
# them that test was skipped everywhere. libxml2-dev: the test that the platform XML is
# well-formed. clang: the fuzz harnesses (-DTS_FUZZ=ON).
packages=(build-essential cmake pkg-config libglib2.0-dev libjson-glib-dev libsimgrid-dev
          libcriterion-dev gnuplot-nox protobuf-c-compiler libprotobuf-c-dev libopenmpi-dev
          openmpi-bin libxml2-dev clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# apt_get ARGS...: apt-get as root, tried three times. On a fresh machine a mirror being synced
# ("Hash Sum mismatch"), a dropped connection or the dpkg lock held by unattended-upgrades at
# first boot ("Could not get lock /var/lib/dpkg/lock-frontend") fail one try, not the next;
# each try also retries downloads and waits up to 5 minutes for the lock. DEBIAN_FRONTEND is
# passed through env, which sudo's env_reset would otherwise drop.
apt_get() {
  local sudo="" try
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  for try in 1 2 3; do
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 \
      -o DPkg::Lock::Timeout=300 "$@" && return 0
    [ "$try" -lt 3 ] && { echo "setup: apt-get $1 failed (try $try of 3); again in 30 s" >&2; sleep 30; }
  done
  return 1
}
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt_get update -qq
  apt_get install -y -qq "${missing[@]}" >/dev/null
fi

# CI builds with warnings as errors; a user's build only warns.
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
build() { # build DIR CMAKE-ARGS...
  local dir=$1; shift
  cmake -S . -B "$dir" -DTS_WERROR=$werror "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)" -- --no-print-directory >/dev/null ||
    { cmake --build "$dir" -j1 2>&1 | grep -E 'error|warning' | head -40 >&2; echo "setup: build failed" >&2; exit 1; }
  echo "setup: built $dir" >&2
}
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
[ "$mode" = build ] && exit 0

# A binary that times out is run once more (a failure is never retried): Criterion 2.4.1, the
# Debian 12 package, has a rare runner deadlock fixed upstream after that release
# (Snaipe/Criterion#468, #483), and CI saw one ASan binary that takes 2 s hang to its timeout.
# Criterion's --verbose output, shown on a timeout, names the test that never finished.
ctest_args=(--output-on-failure -j"$(nproc)" --repeat after-timeout:2)
ctest --test-dir build "${ctest_args[@]}"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON
# The documented commands (label doc) and the install/package tests run in the release pass
# only: they run the same program paths as the unit tests, and take minutes under ASan.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan "${ctest_args[@]}" --label-exclude "slow|doc"
