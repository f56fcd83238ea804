# group_errors.awk: the rows of `trainsim validate --format json` as "GROUP<TAB>|error_pct|", one
# line per row; with -v sum=1 one line per group, its rows' |error| summed. Run with -F'"':
#   trainsim validate --against grid.csv --format json | awk -F'"' -f bench/group_errors.awk
# Shared by the fit scripts' grid searches (bench/fit_h100.sh, bench/fit_b200.sh), whose group
# column holds the value tried.
/^    {/ { g = "" }
$2 == "group" && g == "" { g = $4 }
$2 == "error_pct" {
  sub(/^ *: */, "", $3); sub(/,$/, "", $3); e = $3 + 0; e = e < 0 ? -e : e
  if (sum) s[g] += e; else print g "\t" e
}
END { if (sum) for (g in s) print g "\t" s[g] }
