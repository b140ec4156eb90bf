# Shared by the quant device scripts (scripts/gpu-quant*.sh): sourced with QUANT_DIR set (the logs' folder under $OUT);
# sets R and a fresh tuning cache, and gives:
#   qstep NAME TIMEOUT ARGS...       node dist/bench/quant.js ARGS under a hard limit, log $R/NAME.log ending in its rc
#   qsummary CHECK_TITLE SWEEP_TITLE $R/summary.txt from the check, sweep and bench logs, printed
R="$OUT/$QUANT_DIR"
mkdir -p "$R"
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d)
qstep() {
  local n=$1 to=$2; shift 2
  timeout -k 1 "$to" node dist/bench/quant.js "$@" > "$R/$n.log" 2>&1
  echo "$n rc=$?" >> "$R/$n.log"
}
qsummary() {
  {
    echo "== $1"; grep -E "^check |rc=|FAIL" "$R/check.log"
    echo "== $2"; grep -E "roofline|GB/s|skipped|rc=" "$R/sweep.log"
    echo "== GEMV (tuner's choice) and decode"; grep -E "roofline|GB/s|tok/s|failed|skipped|rc=" "$R/bench.log"
  } > "$R/summary.txt" 2>&1
  cat "$R/summary.txt"
}
