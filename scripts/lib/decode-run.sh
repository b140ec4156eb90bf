# Shared by the decode device scripts (scripts/gpu-decode-*.sh): sourced with DEC_DIR set (the logs' folder under
# $OUT); sets T0, S ($OUT/summary.txt), L ($OUT/$DEC_DIR) and a fresh tuning cache, and gives:
#   dec_tests TIMEOUT              the decode_step + static_decode tests (returns their exit code)
#   dec_bench SHAPE BATCHES TO [NAME]  `nbx bench decode` with NBX_DEBUG (the auto path's timings), log $L/NAME.log (NAME: SHAPE)
#   dec_forced NAME BATCH TO       the same, TinyLlama, under the caller's environment, log $L/NAME.log
#   dec_trace BATCH [NAME]         a per-phase trace (scripts/decode-step-check.mjs) at that batch, log $L/trace-bBATCH[-NAME].log
#   dec_peer SHAPE BATCH TO        `nbx bench decode` against the compiled gpt-fast peer in the same run, log $L/peer-SHAPE-bBATCH.log
#   dec_ncu BATCH TO               one whole-step launch under Nsight Compute (--set full), log $L/ncu-bBATCH.txt
#   dec_fresh                      a fresh tuning cache (NBX_CACHE_DIR) for what follows: the auto path times both step graphs again
#   dec_gap NAME SHAPE [ENV...]    scripts/decode-gap.mjs (300 steps a variant) in a fresh cache, log $L/gap-NAME.log
#   dec_check QUANT                decode-step-check, Llama-3-8B with QUANT weights, whole-step kernel vs op by op, log $L/check-QUANT.log
#   dec_quant NAME SCHEMES TO [ENV...]  bench/quant.js --decode of SCHEMES in a fresh cache, log $L/NAME.log
#   dec_left                       seconds since T0 (to skip what the call's time no longer holds)
#   dec_queued / dec_pack          runs each script of $QUEUED (logs tarred) / tars $L as <DEC_DIR>.tgz
#   dec_finish                     dec_pack, then dec_queued
set -u
T0=$(date +%s)
S=$OUT/summary.txt
DECD=$DEC_DIR # kept: DEC_DIR=... source sets it for the sourcing alone
L=$OUT/$DECD; mkdir -p "$L"
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX)
git log --oneline -1 >> "$S" 2>/dev/null
at() { echo "$1 rc=$2 at $(( $(date +%s) - T0 ))s" >> "$S"; }
dec_tests() {
  timeout -k 5 "$1" node --test dist/test/decode_step.test.js dist/test/static_decode.test.js > "$L/tests.log" 2>&1
  local rc=$?
  at tests $rc; grep -E "^(not ok|# pass|# fail)" "$L/tests.log" >> "$S"; grep -A14 "^not ok" "$L/tests.log" | head -40 >> "$S"
  return $rc
}
dec_bench() {
  local n=${4:-$1}
  NBX_DEBUG=1 timeout -k 5 "$3" node dist/src/cli/nbx.js bench decode --device cuda --shape "$1" --batch "$2" --peers none --ttft-samples 1 > "$L/$n.log" 2>&1
  at "$n" $?; grep -E "decode steps take|composite|^nbx [a-z0-9-]+ batch [0-9]+:|^\| [A-Z]" "$L/$n.log" >> "$S"
}
dec_forced() {
  timeout -k 5 "$3" node dist/src/cli/nbx.js bench decode --device cuda --shape tinyllama --batch "$2" --peers none --ttft-samples 1 > "$L/$1.log" 2>&1
  at "$1" $?; grep -E "^nbx [a-z0-9-]+ batch [0-9]+:" "$L/$1.log" >> "$S"
}
dec_trace() {
  local f=$L/trace-b$1${2:+-$2}.log
  NBX_DECODE_STEP_TRACE=${TRACE_MODE:-1} timeout -k 5 60 node scripts/decode-step-check.mjs --shape tinyllama --batch "$1" --steps 24 --modes off,fused > "$f" 2>&1
  at "trace batch $1 ${2:-}" $?; grep -E "^(trace|fused|off)" "$f" >> "$S"
}
dec_peer() {
  local f=$L/peer-$1-b$2.log
  NBX_DEBUG=1 TORCHINDUCTOR_CACHE_DIR=/tmp/nbx-inductor-cache timeout -k 5 "$3" node dist/src/cli/nbx.js bench decode --device cuda --shape "$1" --batch "$2" --peers gpt-fast --ttft-samples 1 --peer-timeout $(( $3 - 30 )) > "$f" 2>&1
  at "peer $1 batch $2" $?; grep -E "decode steps take|^nbx [a-z0-9-]+ batch [0-9]+:|^gpt-fast|^\| [A-Z]" "$f" >> "$S"
}
dec_ncu() {
  NBX_DECODE_STEP=fused timeout -k 5 "$2" /usr/local/cuda/bin/ncu --kernel-name decode_step --launch-skip 2 --launch-count 1 --set full \
    node scripts/decode-step-check.mjs --shape tinyllama --batch "$1" --steps 4 --modes fused > "$L/ncu-b$1.txt" 2>&1
  at "ncu batch $1" $?
}
dec_fresh() { NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-dec-XXXXXX); }
dec_gap() {
  local n=$1 shape=$2; shift 2
  dec_fresh; env "$@" timeout -k 5 90 node scripts/decode-gap.mjs --shape "$shape" --steps 300 > "$L/gap-$n.log" 2>&1
  at "gap $n" $?; grep -E "^decode-gap|rror" "$L/gap-$n.log" | head -5 >> "$S"
}
dec_check() {
  dec_fresh; timeout -k 5 80 node scripts/decode-step-check.mjs --shape llama3-8b --quant "$1" --modes off,fused --steps 8 > "$L/check-$1.log" 2>&1
  at "check $1" $?; grep -E "^fused" "$L/check-$1.log" >> "$S"
}
dec_quant() {
  local n=$1 sc=$2 to=$3; shift 3
  dec_fresh; env "$@" NBX_DEBUG=1 timeout -k 5 "$to" node dist/bench/quant.js --no-gemv --decode --decode-schemes "$sc" --budget-s $(( to - 10 )) > "$L/$n.log" 2>&1
  at "$n" $?; grep -E "tok/s|decode steps take|rror" "$L/$n.log" | head -16 >> "$S"
}
dec_left() { echo $(( $(date +%s) - T0 )); }
dec_queued() { # each script of $QUEUED, its logs tarred
  local q d
  for q in ${QUEUED:-}; do
    [ -f "scripts/$q" ] || continue
    bash "scripts/$q" > "$OUT/$q.log" 2>&1
    at "$q" $?
    d=${q%.sh}; d=${d#gpu-}; (cd "$OUT" && tar czf "$d.tgz" "$d" "$q.log" 2>/dev/null && rm -rf "$d" "$q.log")
  done
}
dec_pack() { (cd "$OUT" && tar czf "$DECD.tgz" "$DECD" && rm -rf "$DECD"); }
dec_finish() { dec_pack; dec_queued; }
