# accuracy_glance.awk (bench/accuracy.sh): bench/accuracy_rows.awk's lines, sorted by |error|
# (ascending), -> the "At a glance" table of docs/accuracy.md: one line per chip kind over its
# step-time rows, one over every step-time row, one over the bus bandwidth rows, one over the
# bus bandwidth rows of a sweep's first size (start-up) and one over the memory rows (their chip kinds named). Columns: distinct files, rows, mean, median and largest
# |error|, mean signed error (bias). A file whose rows run on two chip kinds counts in both.
BEGIN {
  FS = "\t"
  # The order of the chip kinds in the table; kinds not listed follow, by name.
  no = split("A100|H100/H200|B200/GB200|V100|P40|TPU v2|TPU v3|TPU v4|TPU v5e|TPU v5p|TPU v6e", order, "|")
}
function add(g, name, abs, e) {
  if (!(g in rows)) { ng++; groups[ng] = g }
  rows[g]++; v[g, rows[g]] = abs; sum[g] += abs; bias[g] += e
  if (abs > worst[g]) worst[g] = abs
  if (!((g, name) in seen)) { seen[g, name] = 1; files[g]++ }
}
function line(label, g,    n, med, b) {
  n = rows[g]
  med = n % 2 ? v[g, (n + 1) / 2] : (v[g, n / 2] + v[g, n / 2 + 1]) / 2
  b = sprintf("%+.1f", bias[g] / n); if (b == "-0.0") b = "+0.0"
  printf "| %s | %d | %d | %.1f%% | %.1f%% | %.1f%% | %s%% |\n", label, files[g], n,
    sum[g] / n, med, worst[g], b
}
{
  $4 += 0; $5 += 0
  if ($2 == "step") { add("step " $1, $3, $4, $5); add("step", $3, $4, $5) }
  else { add($2, $3, $4, $5); if (!(($2, $1) in kinds)) { kinds[$2, $1] = 1; nm[$2]++; met[$2, nm[$2]] = $1 } }
}
# kindlist(m): the chip kinds of measurement m's rows, in the table's order.
function kindlist(m,    s, i, o) {
  s = ""
  for (i = 1; i <= no; i++) { o[order[i]] = 1; if ((m, order[i]) in kinds) s = s (s == "" ? "" : ", ") order[i] }
  for (i = 1; i <= nm[m]; i++) if (!(met[m, i] in o)) s = s (s == "" ? "" : ", ") met[m, i]
  return s
}
END {
  print "| chips (step time) | files | rows | mean \\|error\\| | median \\|error\\| | worst \\|error\\| | mean error (bias) |"
  print "|---|---:|---:|---:|---:|---:|---:|"
  for (i = 1; i <= no; i++) { done["step " order[i]] = 1; if (("step " order[i]) in rows) line(order[i], "step " order[i]) }
  # Other kinds (none today), in the order first met.
  for (i = 1; i <= ng; i++) if (groups[i] ~ /^step ./ && !(groups[i] in done)) { k = groups[i]; sub(/^step /, "", k); line(k, groups[i]) }
  if ("step" in rows) line("**every step-time row**", "step")
  if ("busbw" in rows) line("bus bandwidth (" kindlist("busbw") ")", "busbw")
  if ("busbw-startup" in rows)
    line("bus bandwidth, a sweep's first size (start-up, not steady state; " kindlist("busbw-startup") ")", "busbw-startup")
  if ("memory" in rows) line("peak memory (" kindlist("memory") ")", "memory")
}
