#!/bin/sh
# accuracy.sh: replays every shipped measurement file (data/published/*/*.csv with a
# measurement column, docs/accuracy.md) through `trainsim validate --against` and rewrites the
# error tables of docs/accuracy.md between their markers:
#   <!-- accuracy: data/published/vtrain/megatron-single.csv -->  ...  <!-- /accuracy -->
# (the file's group table), and two further kinds of block:
#   <!-- accuracy-rows: data/published/mtnlg/smith2022-mtnlg.csv -->  ...  <!-- /accuracy -->
#     every row of that file: line, group, model, measured, predicted, signed error;
#   <!-- accuracy-pooled: FILE1 FILE2 ... -->  ...  <!-- /accuracy -->
#     the rows of several files pooled: count, mean and largest |error|, mean signed error
#     (the held-out large runs of docs/accuracy.md: data/published/{mtnlg,bloom,llama3,
#     megatron-bridge,megatron-core}, together and per chip kind; the runs from papers,
#     data/published/{gpt-neox,palm,opt}, one row block each);
#   <!-- accuracy-phases: data/published/lamb/you2019-lamb-table1.csv -->  ...  <!-- /accuracy -->
#     the LAMB paper's TPU v3 rows, whose times mix two pre-training phases (not a step-time
#     file): bench/fit_tpuv3.sh --check's tables at the shipped profile;
#   <!-- accuracy-glance -->  ...  <!-- /accuracy -->
#     "At a glance": every row pooled per chip kind (the [chip] profile of the row's topology,
#     bench/accuracy_rows.awk) over step-time rows (the LAMB TPU v3 rows included), then the
#     busbw rows and the memory rows: files, rows, mean/median/largest |error|, bias
#     (bench/accuracy_glance.awk);
#   <!-- accuracy-datasets -->  ...  <!-- /accuracy -->
#     the hand-written datasets table, kept, but each row's fourth column rewritten with the
#     pooled mean |error| (worst, bias) of the `dir/file.csv` files named in its first column.
# Each file's full outputs (text, CSV, JSON, scatter plot) go to out/accuracy/DATASET-NAME/.
#
#   bench/accuracy.sh              # every file (about a minute on 2 cores)
#   bench/accuracy.sh -j 8         # worker processes (default: every core)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
jobs=""
[ "${1:-}" = "-j" ] && jobs="-j ${2:?-j N}"
bench_build
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
  # Every row (validate.txt's first table, fields two or more spaces apart; the split, too long
  # for a table, left out): line, group, model, measured, predicted, error.
  awk '
    NR == 1 || /^line/ { next }
    /^$/ { exit }
    { sub(/^ +/, ""); n = split($0, w, /  +/)
      if (!hdr) { print "| line | group | model | measured | predicted | error |"
                  print "|---:|---|---|---:|---:|---:|"; hdr = 1 }
      printf "| %s | %s | %s | %s | %s | %s |\n", w[1], w[2], w[3], w[n - 2], w[n - 1], w[n] }
  ' "$out/validate.txt" > "$tables/$name.rows.md"
  cp "$out/validate.csv" "$tables/$name.csv"
  # One line a row for the datasets table and "At a glance": chip kind (the [chip] profile of
  # the row's topology file: topologies/NAME.ini, or a .ini beside the CSV), measurement kind,
  # file, |error|, signed error.
  awk -v f="$f" -v name="$name" -f bench/accuracy_rows.awk "$out/validate.csv" >> "$tables/rows.tsv"
  echo "$f: $(tail -n 1 "$out/validate.txt")"
done
# The TPU v3 rows of two phases each (bench/fit_tpuv3.sh, data/published/lamb/PROVENANCE.txt).
bench/fit_tpuv3.sh --check 2>/dev/null > "$tables/phases.txt"
echo "data/published/lamb/you2019-lamb-table1.csv: $(tail -n 1 "$tables/phases.txt")"
# Its LAMB rows (a chip count first; error printed to 0.1%) count as TPU v3 step times in "At a
# glance" (its GPT-J rows are benchmarks-v3.csv's, counted above).
awk '$1 ~ /^[0-9]+$/ && ($2 == "fit" || $2 == "held-out") { e = $NF; sub(/%$/, "", e); e += 0
  printf "TPU v3\tstep\tlamb-you2019-lamb-table1\t%.6f\t%.6f\n", e < 0 ? -e : e, e }' \
  "$tables/phases.txt" >> "$tables/rows.tsv"
# "At a glance": per chip kind over step-time rows, then bus bandwidth and memory rows.
LC_ALL=C sort -t "$(printf '\t')" -k4,4n "$tables/rows.tsv" |
  awk -F '\t' -f bench/accuracy_glance.awk > "$tables/glance.md"
# Rewrite each marked block of docs/accuracy.md with its file's table.
awk -v dir="$tables" '
  BEGIN { FS = " "; file = dir "/rows.tsv"
    while ((getline line < file) > 0) {
      split(line, w, "\t"); k = w[3]; nr[k]++; sa[k] += w[4]; ss[k] += w[5]
      if (w[4] + 0 > mx[k] + 0) mx[k] = w[4] + 0
    }
    close(file)
  }
  /^<!-- accuracy-glance -->$/ {
    print; file = dir "/glance.md"
    while ((getline line < file) > 0) print line
    close(file); skip = 1; next
  }
  /^<!-- accuracy-datasets -->$/ { print; datasets = 1; next }
  # A row of the datasets table: its fourth column becomes the pooled figures of the files
  # named in its first (`dir/file.csv`).
  datasets && /^\| / && !/^\|---/ {
    line = $0; gsub(/\\\|/, "<<PIPE>>", line); m = split(line, c, "|")
    cell = c[2]; rows = 0; sum = 0; bias = 0; worst = 0
    while (match(cell, /`[^`]*\.csv`/)) {
      k = substr(cell, RSTART + 1, RLENGTH - 2); cell = substr(cell, RSTART + RLENGTH)
      sub(/\.csv$/, "", k); sub(/\//, "-", k)
      rows += nr[k]; sum += sa[k]; bias += ss[k]; if (mx[k] > worst) worst = mx[k]
    }
    # The hand-written rows column ("1,440", "61 + 78", "10 (1 fitted)"): warn when its sum
    # is not the row count of the files (the table is then out of date; nothing is changed).
    r = c[4]; sub(/\(.*/, "", r); gsub(/[ ,]/, "", r); nw = split(r, rw, "+"); said = 0
    for (i = 1; i <= nw; i++) said += rw[i]
    if (rows && said != rows)
      printf "docs/accuracy.md:%d: the datasets table says %d rows, the files have %d\n", NR, said, rows > "/dev/stderr"
    if (rows && c[2] !~ /^ dataset /) {
      b = sprintf("%+.1f", bias / rows); if (b == "-0.0") b = "+0.0"
      c[5] = sprintf(" %.1f%% (worst %.1f%%, bias %s%%) ", sum / rows, worst, b)
      line = ""; for (i = 1; i < m; i++) line = line c[i] "|"
      gsub(/<<PIPE>>/, "\\|", line)
      print line; next
    }
  }
  /^<!-- accuracy: .* -->$/ {
    print; f = $3; n = split(f, p, "/"); name = p[n - 1] "-" p[n]; sub(/\.csv$/, "", name)
    file = dir "/" name ".md"
    while ((getline line < file) > 0) print line
    close(file); skip = 1; next
  }
  /^<!-- accuracy-rows: .* -->$/ {
    print; f = $3; n = split(f, p, "/"); name = p[n - 1] "-" p[n]; sub(/\.csv$/, "", name)
    file = dir "/" name ".rows.md"
    while ((getline line < file) > 0) print line
    close(file); skip = 1; next
  }
  /^<!-- accuracy-pooled: .* -->$/ {
    print; rows = 0; sum = 0; bias = 0; worst = 0
    for (i = 3; i < NF; i++) {
      n = split($i, p, "/"); name = p[n - 1] "-" p[n]; sub(/\.csv$/, "", name)
      # validate.csv: error_pct is the field before the last (detail, quoted when it has commas).
      file = dir "/" name ".csv"; first = 1
      while ((getline line < file) > 0) {
        if (first) { first = 0; continue }
        if (line ~ /"$/) sub(/,"[^"]*"$/, "", line); else sub(/,[^,]*$/, "", line)
        e = line; sub(/^.*,/, "", e); e += 0
        rows++; sum += (e < 0 ? -e : e); bias += e
        if ((e < 0 ? -e : e) > worst) worst = (e < 0 ? -e : e)
      }
      close(file)
    }
    print "| rows | mean \\|error\\| | max \\|error\\| | mean error (bias) |"
    print "|---:|---:|---:|---:|"
    if (rows) printf "| %d | %.1f%% | %.1f%% | %+.1f%% |\n", rows, sum / rows, worst, bias / rows
    skip = 1; next
  }
  /^<!-- accuracy-phases: .* -->$/ {
    print; file = dir "/phases.txt"
    printf "```\n"; while ((getline line < file) > 0) print line; printf "```\n"
    close(file); skip = 1; next
  }
  /^<!-- \/accuracy -->$/ { skip = 0; datasets = 0 }
  !skip { print }
' docs/accuracy.md > "$tables/accuracy.md"
# Replaced by a rename in docs/, never rewritten in place: a reader (the doc tests read
# docs/accuracy.md's blocks; ctest may be running) sees the old file or the new, not a
# truncated one (doc_accuracy_737 and _777 printed nothing when they read it mid-copy).
cp "$tables/accuracy.md" docs/.accuracy.md.new
mv -f docs/.accuracy.md.new docs/accuracy.md
echo "rewrote docs/accuracy.md; outputs in out/accuracy/"
