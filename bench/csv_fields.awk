# csv_fields.awk: fields(line, f) splits one CSV line into f[1..n] and returns n, honouring
# double quotes (trainsim's CSVs quote the split, which holds commas). Shared by the bench
# scripts that read `trainsim validate --format csv` output: prepend it to their program,
#   awk "$(cat bench/csv_fields.awk)"'...program...' FILE
function fields(line, f,    n, i, c, q, cur) {
  n = 0; cur = ""; q = 0
  for (i = 1; i <= length(line); i++) {
    c = substr(line, i, 1)
    if (c == "\"") q = !q
    else if (c == "," && !q) { f[++n] = cur; cur = "" }
    else cur = cur c
  }
  f[++n] = cur
  return n
}
