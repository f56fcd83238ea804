#!/usr/bin/env bash
# Every documented command is a test (in the spirit of SimGrid's tesh): fenced shell blocks of
# README.md and docs/*.md that run trainsim, and the examples of every `trainsim CMD --help`.
#
#   tests/doctest.sh list FILE...            one line per runnable block: NAME FILE LINE LABEL
#   tests/doctest.sh run FILE LINE BIN SRC   run the block that opens at FILE:LINE
#   tests/doctest.sh help CMD BIN SRC        run the examples of `trainsim CMD --help`
#
# A block is runnable when its fence has no language or sh/bash/console and a line of it runs
# trainsim (`./build/sim/trainsim ...` or `trainsim ...`). It runs as one bash script (set -e)
# in a scratch folder holding links to the repository's folders and build/sim/trainsim, with
# trainsim on PATH and /tmp/ rewritten to a scratch tmp/, so blocks can run in parallel.
# Checks: every command exits 0 (or N when its comment says "exit N"), and the block prints
# something. Expected output (tesh-like) is given by a fenced block right after, marked
#   <!-- doctest: output -->            its lines must appear, in order, in what the block
#                                       printed: words equal, numbers within 1% (tolerance=N%)
# Other markers, on the line before a fence:
#   <!-- doctest: slow -->              runs in the release pass only (ctest label slow)
#   <!-- doctest: sed=EXPR -->          run with the block edited by sed EXPR (smaller sizes)
#   <!-- doctest: skip REASON -->       not run; REASON says where it is tested instead
#   <!-- doctest: needs=CMD -->         run when CMD is installed (`CMD --version` succeeds);
#                                       else reported skipped (exit 77, ctest's SKIP_RETURN_CODE)
# The --help examples take no markers: tests/doctest.conf may give a command's examples a sed
# expression that shrinks them (a smaller model or array), with the reason.
set -uo pipefail
mode=${1:-}

# blocks FILE: "LINE<TAB>LANG<TAB>MARKER" per fenced block (MARKER: the doctest comment before);
# an empty LANG or MARKER is "-" (read would merge two tabs).
blocks() {
  awk '
    /^```/ { if (!inb) { inb = 1; l = substr($0, 4); printf "%d\t%s\t%s\n", NR, l == "" ? "-" : l, marker == "" ? "-" : marker } else inb = 0; marker = ""; next }
    inb { next }
    /^<!-- doctest:.*-->$/ { marker = $0; sub(/^<!-- doctest: */, "", marker); sub(/ *-->$/, "", marker); next }
    /[^ ]/ { marker = "" }' "$1"
}
# body FILE LINE: the lines of the block opening at LINE.
body() { awk -v s="$2" 'NR > s && /^```/ { exit } NR > s' "$1"; }
is_cmd='^(\$ )?(\./setup\.sh && )?(\./build/sim/)?trainsim( |$)'

case $mode in
list)
  shift
  for f in "$@"; do
    base=$(basename "$f" .md)
    blocks "$f" | while IFS=$'\t' read -r line lang marker; do
      case $lang in - | sh | bash | console) ;; *) continue ;; esac
      # grep -c reads the whole block: grep -q would close the pipe early (pipefail).
      [ "$(body "$f" "$line" | grep -Ec "$is_cmd")" -gt 0 ] || continue
      label=fast
      case $marker in skip*) label=skip ;; *slow*) label=slow ;; esac
      printf '%s_%s\t%s\t%s\t%s\n' "$base" "$line" "$f" "$line" "$label"
    done
  done
  exit 0
  ;;
run | help) ;;
*) echo "usage: tests/doctest.sh list FILE... | run FILE LINE BIN SRC | help CMD BIN SRC" >&2; exit 2 ;;
esac

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
setup_scratch() { # BIN SRC
  local bin=$1 src=$2 d
  for d in "$src"/*/; do ln -s "${d%/}" "$scratch/$(basename "$d")"; done
  # out/ (bench outputs, earlier runs) is not shared: blocks running in parallel write
  # out/run, out/scaling, ... each into its own scratch (README and docs/whatif.md both write
  # out/run: with a checkout's out/ linked in they raced under ctest -j).
  rm -f "$scratch/build" "$scratch/tests" "$scratch/out"
  # Scenario files are copied: `check --update` in a doc rewrites goldens in place.
  mkdir -p "$scratch/tests"
  for d in "$src"/tests/*; do ln -s "$d" "$scratch/tests/$(basename "$d")"; done
  rm -f "$scratch/tests/scenarios" && cp -r "$src/tests/scenarios" "$scratch/tests/scenarios"
  mkdir -p "$scratch/build/sim" "$scratch/tmp" "$scratch/bin"
  ln -s "$bin" "$scratch/build/sim/trainsim"
  ln -s "$bin" "$scratch/bin/trainsim"
  export PATH="$scratch/bin:$PATH" TMPDIR="$scratch/tmp"
}

# script: the block's shell text on stdin -> a checked bash script on stdout. A command whose
# comment (on its line or the next) says "exit N" must exit N; the others must exit 0.
script() {
  awk -v cmdre="$is_cmd" '
    function flush() {
      if (cmd == "") return
      if (want != "") printf "rc=0; %s || rc=$?; [ $rc -eq %s ] || { echo \"doctest: exit $rc, expected %s: %s\" >&2; exit 1; }\n", cmd, want, want, substr(cmd, 1, 60)
      else printf "%s\n", cmd
      cmd = ""; want = ""
    }
    {
      line = $0
      sub(/^\$ /, "", line); sub(/^\.\/setup\.sh && /, "", line)
      if (cont) { c = line; sub(/[ \t]+#[^"\x27]*$/, "", c); cmd = cmd "\n" c; cont = (c ~ /\\$/); if (line ~ /exit [0-9]/) want = gensub_exit(line); next }
      if (line ~ /^[ \t]*#/) { if (line ~ /exit [0-9]/ && cmd != "") want = gensub_exit(line); if (line ~ /^#!/) next; next }
      flush()
      if (heredoc != "") { printf "%s\n", line; if (line == heredoc) heredoc = ""; next }
      c = line
      if (c ~ /<<\x27?[A-Z]+\x27?$/) { h = c; sub(/.*<<\x27?/, "", h); sub(/\x27$/, "", h); heredoc = h; printf "%s\n", c; next }
      sub(/[ \t]+#[^"\x27]*$/, "", c)
      if (line ~ /#.*exit [0-9]/) want = gensub_exit(line)
      cmd = c; cont = (c ~ /\\$/)
    }
    function gensub_exit(s,   m) { match(s, /exit [0-9]+/); return substr(s, RSTART + 5, RLENGTH - 5) }
    END { flush() }'
}

# expect_lines EXPECTED ACTUAL TOL: every expected line appears, in order, in the actual text:
# same words, numbers within TOL percent. Lines "..." are skipped.
check_output() {
  awk -v tol="$3" '
    function isnum(t) { return t ~ /^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?%?x?,?;?$/ }
    function num(t) { gsub(/[%x,;]/, "", t); return t + 0 }
    function same(a, b,   na, nb, ta, tb, i, x, y) {
      na = split(a, ta); nb = split(b, tb)
      if (na != nb) return 0
      for (i = 1; i <= na; i++) {
        if (ta[i] == tb[i]) continue
        if (!isnum(ta[i]) || !isnum(tb[i])) return 0
        x = num(ta[i]); y = num(tb[i])
        if (x == y) continue
        if ((x > y ? x - y : y - x) > tol / 100 * (x > 0 ? x : -x) + 1e-12) return 0
      }
      return 1
    }
    FNR == NR { if ($0 !~ /^ *(\.\.\.)? *$/) want[++ne] = $0; next }
    { act[++na] = $0 }
    END {
      j = 1
      for (i = 1; i <= ne; i++) {
        while (j <= na && !same(want[i], act[j])) j++
        if (j > na) { printf "doctest: expected line %d not found (words equal, numbers within %s%%):\n  %s\n", i, tol, want[i]; bad = 1; break }
        j++
      }
      exit bad
    }' "$1" "$2"
}

run_text() { # SCRIPT-FILE NAME -> runs, checks non-empty output
  local s=$1 name=$2
  (cd "$scratch" && bash -e "$s" > "$scratch/out.txt" 2> "$scratch/err.txt")
  local rc=$?
  cat "$scratch/out.txt"
  if [ $rc -ne 0 ]; then
    echo "doctest: $name: the block failed (exit $rc); stderr:" >&2
    tail -20 "$scratch/err.txt" >&2
    return 1
  fi
  if [ ! -s "$scratch/out.txt" ] && [ ! -s "$scratch/err.txt" ]; then
    echo "doctest: $name: printed nothing" >&2
    return 1
  fi
  return 0
}

if [ "$mode" = run ]; then
  file=$2 line=$3 bin=$4 src=$5
  setup_scratch "$bin" "$src"
  # The doc is read once, here: its marker, block and expected output all come from one
  # version. bench/accuracy.sh rewrote docs/accuracy.md's tables in place (cp), and a block
  # read in that moment was empty, so the test failed with "printed nothing": doc_accuracy_737
  # and _777, running side by side under ctest -j2, failed so together (reproduced: 6 of 12
  # runs of the block at line 777 while a loop rewrote the file with cp; 0 of 12 when it is
  # replaced by a rename, as bench/accuracy.sh now does). Another writer may still rewrite in
  # place, so a copy caught mid-write is taken again once.
  label=$file
  opens_block() { # FILE: does LINE open a block that runs trainsim?
    blocks "$1" | awk -F'\t' -v l="$line" '$1 == l { f = 1 } END { exit !f }' &&
      [ "$(body "$1" "$line" | grep -Ec "$is_cmd")" -gt 0 ]
  }
  cp "$label" "$scratch/doc.md" || { echo "doctest: cannot read $label" >&2; exit 1; }
  if ! opens_block "$scratch/doc.md"; then
    sleep 1
    cp "$label" "$scratch/doc.md" || { echo "doctest: cannot read $label" >&2; exit 1; }
  fi
  file=$scratch/doc.md
  # Tests are named by line at configure time: a doc edited since then has other lines there.
  if ! opens_block "$file"; then
    echo "doctest: $label:$line no longer opens a block that runs trainsim (the file changed" \
      "since cmake listed its blocks, or is being rewritten); re-run cmake -S . -B build to" \
      "list them again" >&2
    exit 1
  fi
  marker=$(blocks "$file" | awk -F'\t' -v l="$line" '$1 == l { print $3 }')
  case $marker in skip*) echo "skipped: ${marker#skip}"; exit 0 ;; esac
  case $marker in *needs=*)
    need=${marker#*needs=}; need=${need%% *}
    if ! command -v "$need" > /dev/null || ! "$need" --version > /dev/null 2>&1 < /dev/null; then
      echo "skipped: $label:$line needs $need, which is not installed (Debian: apt-get install $need)"
      exit 77
    fi ;;
  esac
  body "$file" "$line" | sed "s#/tmp/#$scratch/tmp/#g" > "$scratch/block.txt"
  case $marker in *sed=*)
    expr=${marker#*sed=}
    sed -i -e "$expr" "$scratch/block.txt" ;;
  esac
  # Output lines inside the block (not commands, comments or continuations) are expected output.
  script < "$scratch/block.txt" > "$scratch/block.sh"
  echo "--- $label:$line"; cat "$scratch/block.sh"; echo "---"
  run_text "$scratch/block.sh" "$label:$line" || exit 1
  # Fences marked output after this block (before the next runnable one) hold expected lines.
  blocks "$file" | awk -F'\t' -v l="$line" '$1 > l' > "$scratch/after.txt"
  while IFS=$'\t' read -r nline nlang nmarker; do
    case $nlang in - | sh | bash | console)
      [ "$(body "$file" "$nline" | grep -Ec "$is_cmd")" -gt 0 ] && break ;;
    esac
    case $nmarker in output*) ;; *) continue ;; esac
    tol=1
    case $nmarker in *tolerance=*) tol=${nmarker#*tolerance=}; tol=${tol%%%*} ;; esac
    body "$file" "$nline" > "$scratch/expected.txt"
    cat "$scratch/out.txt" "$scratch/err.txt" > "$scratch/all.txt"
    check_output "$scratch/expected.txt" "$scratch/all.txt" "$tol" || { echo "doctest: $label:$nline: output differs" >&2; exit 1; }
    echo "expected output of $label:$nline: matches within $tol%"
  done < "$scratch/after.txt"
  exit 0
fi

# help CMD BIN SRC: each "  trainsim CMD ..." line of the help text is one example.
cmd=$2 bin=$3 src=$4
setup_scratch "$bin" "$src"
# tests/doctest.conf may shrink a command's examples ("help CMD sed=EXPR", with its reason).
expr=$(awk -v c="$cmd" '$1 == "help" && $2 == c { sub(/^help [^ ]+ sed=/, ""); print; exit }' \
  "$(dirname "$0")/doctest.conf")
"$bin" "$cmd" --help | grep -E '^ +trainsim [a-z]' | grep -v 'OPTION' | sed 's/^ *//' \
  | sed "s#/tmp/#$scratch/tmp/#g" | sed -e "${expr:-p;d}" > "$scratch/examples.txt"
n=$(wc -l < "$scratch/examples.txt")
[ "$n" -gt 0 ] || { echo "doctest: trainsim $cmd --help has no example" >&2; exit 1; }
i=0
while IFS= read -r ex; do
  i=$((i + 1))
  echo "$ex" | script > "$scratch/ex.sh"
  echo "--- trainsim $cmd --help example $i: $ex"
  run_text "$scratch/ex.sh" "trainsim $cmd --help example $i" > /dev/null || exit 1
done < "$scratch/examples.txt"
echo "trainsim $cmd --help: $n examples ran"
