#!/usr/bin/env bash
# check_layers.sh BUILD_DIR: every library of sim/ (one per folder, a layer of the pipeline) may
# use symbols only from itself and the layers its line in sim/CMakeLists.txt names, followed
# transitively. An object that calls upward (the planner calling a backend, say) fails here with
# the symbol, the layer that uses it and the layer that defines it.
set -euo pipefail
build=$1
shopt -s nullglob
files=("$build"/ts_layer_*.txt)
[ ${#files[@]} -gt 0 ] || { echo "check_layers: no ts_layer_*.txt in $build" >&2; exit 2; }
command -v nm >/dev/null || { echo "check_layers: nm not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A archive deps
for f in "${files[@]}"; do
  read -r name path rest <"$f"
  archive[$name]=$path
  deps[$name]="$rest"
  [ -f "$path" ] || { echo "check_layers: $path missing (build first)" >&2; exit 2; }
  nm -g --defined-only "$path" 2>/dev/null | awk 'NF >= 3 {print $3}' | sort -u >"$tmp/def.$name"
  nm -u "$path" 2>/dev/null | awk '{print $NF}' | sort -u >"$tmp/undef.$name"
done
# symbol -> defining layer, for the messages
for name in "${!archive[@]}"; do awk -v l="$name" '{print $1, l}' "$tmp/def.$name"; done >"$tmp/owners"
closure() { # the layers reachable from $1 through deps, itself included
  local seen=" $1 " queue=($1) l d
  while [ ${#queue[@]} -gt 0 ]; do
    l=${queue[0]}; queue=("${queue[@]:1}")
    for d in ${deps[$l]}; do
      case "$seen" in *" $d "*) ;; *) seen="$seen$d "; queue+=("$d") ;; esac
    done
  done
  echo $seen
}
bad=0
checked=0
for name in "${!archive[@]}"; do
  allowed=$(closure "$name")
  cat $(for a in $allowed; do echo "$tmp/def.$a"; done) | sort -u >"$tmp/allowed"
  # Symbols this layer needs that no allowed layer defines, but some other layer does.
  comm -23 "$tmp/undef.$name" "$tmp/allowed" >"$tmp/missing"
  hits=$(awk -v me="$name" 'NR == FNR { need[$1] = 1; next }
           ($1 in need) { print "layers: " me " uses " $1 ", defined in " $2 ", which is not below it" }' \
         "$tmp/missing" "$tmp/owners")
  if [ -n "$hits" ]; then
    echo "$hits"
    bad=1
  fi
  checked=$((checked + 1))
done
echo "layers: $checked libraries checked"
exit $bad
