#!/usr/bin/env bash
# Writes the man pages of trainsim from its own --help text, so a page cannot drift from the
# program: trainsim.1 from `trainsim --help`, trainsim-CMD.1 from `trainsim CMD --help` for
# every command that `trainsim --help` lists (a command added later gets its page unasked).
# Debian's help2man is not used: it wants one program per page and does not know GOption's
# "Application Options:" layout; this is 80 lines of awk and adds no build dependency.
# Usage: packaging/help2man.sh TRAINSIM OUTDIR
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
export LC_ALL=C.UTF-8
version=$("$bin" --version | awk '{print $2}')
# SOURCE_DATE_EPOCH (reproducible builds) fixes the date; without it the version stands alone.
date=""
[ -n "${SOURCE_DATE_EPOCH:-}" ] && date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
commands=$("$bin" --help | awk '/^Commands:/{c=1; next} c && /^  [a-z]/{print $1} c && /^$/{c=0}')

# roff PAGE-NAME SUMMARY: --help text on stdin, a man page on stdout.
roff() {
  SEE=$3 awk -v name="$1" -v summary="$2" -v version="$version" -v date="$date" '
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'"'"']/, "\\\\\\&&", s); return s }
    function opt(s,   a, i, r, parts) {
      # "-t, --topology=T" -> bold names, italic argument
      n = split(s, parts, ", "); r = ""
      for (i = 1; i <= n; i++) {
        a = parts[i]
        if (match(a, /=/)) a = "\\fB" esc(substr(a, 1, RSTART - 1)) "\\fR=\\fI" esc(substr(a, RSTART + 1)) "\\fR"
        else a = "\\fB" esc(a) "\\fR"
        r = r (i > 1 ? ", " : "") a
      }
      return r
    }
    BEGIN {
      up = toupper(name)
      printf ".TH \"%s\" 1 \"%s\" \"trainsim %s\" \"User Commands\"\n", up, date, version
      printf ".SH NAME\n%s \\- %s\n", esc(name), esc(summary)
      section = ""; see = ENVIRON["SEE"]
    }
    /^Usage: ./ { u = $0; sub(/^Usage: /, "", u); printf ".SH SYNOPSIS\n.B %s\n", esc(u); section = "desc0"; next }
    /^Usage:/ { section = "usage"; next }
    section == "usage" && /^  / { sub(/^ +/, ""); printf ".SH SYNOPSIS\n.B %s\n", esc($0); section = "desc0"; next }
    /^[A-Z][A-Za-z ]*:$/ {
      h = $0; sub(/:$/, "", h)
      if (h ~ /Options$/) { if (!opts) print ".SH OPTIONS"; opts = 1; section = "opts" }
      else { if (pre) print ".fi"; pre = 0; printf ".SH %s\n", esc(toupper(h)); section = "pre" }
      next
    }
    section == "opts" && /^  +-/ {
      line = $0; sub(/^ +/, "", line)
      if (match(line, /   +/)) { o = substr(line, 1, RSTART - 1); d = substr(line, RSTART + RLENGTH) }
      else { o = line; d = "" }
      printf ".TP\n%s\n%s\n", opt(o), esc(d)
      next
    }
    section == "opts" && /^   +/ { l = $0; sub(/^ +/, "", l); print esc(l); next }
    section == "pre" && /^$/ { if (pre) print ""; next }
    section == "pre" { if (!pre) print ".nf"; pre = 1; l = $0; sub(/^  /, "", l); print esc(l); next }
    /^$/ { if (section == "desc") print ".PP"; next }
    { if (section == "desc0") { print ".SH DESCRIPTION"; section = "desc" } print esc($0) }
    END {
      if (pre) print ".fi"
      if (see != "") { print ".SH SEE ALSO"; print see }
      print ".SH REPORTING BUGS"
      print "Bad input exits with status 2 and one line naming the file, the place and what was expected."
    }'
}

see=""
for c in $commands; do see="$see${see:+, }\\fBtrainsim-$c\\fR(1)"; done
"$bin" --help | roff trainsim "discrete-event simulator of distributed deep-learning training" "$see" \
  > "$out/trainsim.1"
for c in $commands; do
  summary=$("$bin" --help | awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
  "$bin" "$c" --help | roff "trainsim-$c" "$summary" "\\fBtrainsim\\fR(1)" > "$out/trainsim-$c.1"
done
