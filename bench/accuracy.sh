#!/bin/sh
# accuracy.sh: replays every shipped measurement file (data/published/*/*.csv with a
# measurement column, docs/accuracy.md) through `trainsim validate --against` and rewrites the
# error tables of docs/accuracy.md between their markers:
#   <!-- accuracy: data/published/vtrain/megatron-single.csv -->  ...  <!-- /accuracy -->
# Each file's full outputs (text, CSV, JSON, scatter plot) go to out/accuracy/DATASET-NAME/.
#
#   bench/accuracy.sh              # every file (about a minute on 2 cores)
#   bench/accuracy.sh -j 8         # worker processes (default: every core)
set -eu
cd "$(dirname "$0")/.."
jobs=""
[ "${1:-}" = "-j" ] && jobs="-j ${2:?-j N}"
cmake -S . -B build >/dev/null
cmake --build build -j2 --target trainsim >/dev/null
plot=""
command -v gnuplot >/dev/null && plot="--plot"
tables=$(mktemp -d)
trap 'rm -rf "$tables"' EXIT
for f in data/published/*/*.csv; do
  # A measurement file: its header (first line not starting with #) names a measurement.
  grep -v '^#' "$f" | head -n 1 | grep -Eq '(^|,)(step_time_(s|ms)|busbw_GBps|peak_memory_(GiB|GB|MiB|bytes)|peak_activation_memory_sum_(GiB|bytes))(,|$)' ||
    continue
  name=$(basename "$(dirname "$f")")-$(basename "$f" .csv)
  out=out/accuracy/$name
  # shellcheck disable=SC2086
  if ! ./build/sim/trainsim validate --against "$f" -o "$out" $plot $jobs 2>"$tables/err"; then
    cat "$tables/err" >&2
    exit 1
  fi
  # The group table (after the blank line) of validate.txt, as Markdown.
  awk -v cmd="./build/sim/trainsim validate --against $f" '
    BEGIN { printf "```\n%s\n```\n\n", cmd }
    /^$/ { body = 1; next }
    body && /^group/ { print "| group | rows | mean \\|error\\| | median \\|error\\| | max \\|error\\| | mean error (bias) |"
                       print "|---|---:|---:|---:|---:|---:|"; next }
    body { n = split($0, w, /  +/); printf "| %s |", w[1]; for (i = 2; i <= n; i++) printf " %s |", w[i]; printf "\n" }
  ' "$out/validate.txt" > "$tables/$name.md"
  echo "$f: $(tail -n 1 "$out/validate.txt")"
done
# Rewrite each marked block of docs/accuracy.md with its file's table.
awk -v dir="$tables" '
  /^<!-- accuracy: .* -->$/ {
    print; f = $3; n = split(f, p, "/"); name = p[n - 1] "-" p[n]; sub(/\.csv$/, "", name)
    file = dir "/" name ".md"
    while ((getline line < file) > 0) print line
    close(file); skip = 1; next
  }
  /^<!-- \/accuracy -->$/ { skip = 0 }
  !skip { print }
' docs/accuracy.md > "$tables/accuracy.md"
cp "$tables/accuracy.md" docs/accuracy.md
echo "rewrote docs/accuracy.md; outputs in out/accuracy/"
