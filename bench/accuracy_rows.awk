# accuracy_rows.awk (bench/accuracy.sh): one validate.csv -> one line a row, tab-separated:
#   chip kind, measurement (step, busbw, busbw-startup, memory), dataset name, |error| %, signed
#   error %. busbw-startup: a bus bandwidth row whose group says "(start-up)", the first size of
#   an nccl-tests sweep, which times the communicators' set-up (data/published/echo-nccl).
# The chip kind is the [chip] profile of the row's topology: NAME.ini beside the measurement
# file when the topology names a file, else topologies/NAME.ini (as `validate` looks them up).
#   awk -v f=data/published/DIR/FILE.csv -v name=DIR-FILE -f bench/accuracy_rows.awk validate.csv

# csv(s, a): split one CSV line into a[1..n] (fields may be quoted, "" is a quote); returns n.
function csv(s, a,    n, i, c, q, fld) {
  n = 0; fld = ""; q = 0
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (q) {
      if (c == "\"") { if (substr(s, i + 1, 1) == "\"") { fld = fld c; i++ } else q = 0 }
      else fld = fld c
    } else if (c == "\"") q = 1
    else if (c == ",") { a[++n] = fld; fld = "" }
    else fld = fld c
  }
  a[++n] = fld
  return n
}
# profile(path): the value of `profile` in the [chip] section of an .ini file ("" if none).
function profile(path,    line, sec, v) {
  sec = ""; v = ""
  while ((getline line < path) > 0) {
    if (line ~ /^\[/) { sec = line; sub(/[ \t]*(#.*)?$/, "", sec) }
    else if (sec == "[chip]" && line ~ /^profile[ \t]*=/) {
      v = line; sub(/^profile[ \t]*=[ \t]*/, "", v); sub(/[ \t]*(#.*)?$/, "", v)
    }
  }
  close(path)
  return v
}
# kind(topo): the chip kind of a topology ("other (TOPO)" when its profile is not one below).
function kind(topo,    dir, path, p, k) {
  if (topo in cache) return cache[topo]
  dir = f; sub(/[^\/]*$/, "", dir)
  if (topo ~ /\.ini$/) path = (topo ~ /^\// ? topo : dir topo)
  else path = "topologies/" topo ".ini"
  p = profile(path)
  if (p ~ /^a100/) k = "A100"
  else if (p ~ /^h[12]00/) k = "H100/H200"
  else if (p ~ /^g?b200/) k = "B200/GB200"
  else if (p ~ /^v100/) k = "V100"
  else if (p ~ /^p40/) k = "P40"
  else if (p ~ /^tpu-v[0-9]/) { k = p; sub(/^tpu-/, "TPU ", k) }
  else k = "other (" topo ")"
  cache[topo] = k
  return k
}
NR == 1 {
  n = csv($0, h)
  for (i = 1; i <= n; i++) {
    if (h[i] == "topology") ti = i
    if (h[i] == "error_pct") ei = i
    if (h[i] == "group") gi = i
    if (h[i] ~ /^measured_/) m = h[i]
  }
  if (m ~ /step_time/) m = "step"; else if (m ~ /busbw/) m = "busbw"; else m = "memory"
  next
}
{
  csv($0, a); e = a[ei] + 0
  k = m == "busbw" && gi && a[gi] ~ /\(start-up\)/ ? "busbw-startup" : m
  printf "%s\t%s\t%s\t%.6f\t%.6f\n", kind(a[ti]), k, name, e < 0 ? -e : e, e
}
