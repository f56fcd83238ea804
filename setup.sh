#!/usr/bin/env bash
# Installs what trainsim needs (Debian 12 packages) when missing, then configures and builds it
# in ./build. Safe to run again: it installs nothing that is present and rebuilds incrementally.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake pkg-config libglib2.0-dev libjson-glib-dev libsimgrid-dev
          libcriterion-dev gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# CI builds with warnings as errors; a user's build only warns.
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTS_WERROR=$werror >/dev/null
cmake --build build -j"$(nproc)" -- --no-print-directory >/dev/null ||
  { cmake --build build -j1 2>&1 | grep -E 'error|warning' | head -40 >&2; echo "setup: build failed" >&2; exit 1; }
echo "setup: built build/sim/trainsim" >&2
