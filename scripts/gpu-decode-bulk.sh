#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-attn7.sh gpu-quant7.sh" bash scripts/gpu-decode-bulk.sh (ninth session, last call): the
# whole-step kernel with its inputs staged by sm_90 bulk copies (stage_rows): tests first (should they fail, the rest runs
# with NBX_DECODE_STEP_BULK=0), tok/s at batch 1-8 (TinyLlama) and 1, 8 (8B) with the auto path's timings, per-phase traces
# at batch 8 and 1, the register-staged inputs (NBX_DECODE_STEP_BULK=0) at batch 1 and 8 and one head an attention item
# (NBX_DECODE_STEP_HEADS=1) at batch 8 for comparison, then the helpers'
# device scripts if queued. Logs under $OUT/dec3 (tarred), summary in $OUT/summary.txt.
set -u
T0=$(date +%s)
S=$OUT/summary.txt
L=$OUT/dec3; mkdir -p $L
export NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-c3-XXXXXX)
timeout -k 5 90 node --test dist/test/decode_step.test.js dist/test/static_decode.test.js > $L/tests.log 2>&1
rc=$?
echo "tests rc=$rc at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^(not ok|# pass|# fail)" $L/tests.log >> $S; grep -A14 "^not ok" $L/tests.log | head -40 >> $S
if [ $rc -ne 0 ]; then export NBX_DECODE_STEP_BULK=0; echo "tests failed: the rest with NBX_DECODE_STEP_BULK=0" >> $S; fi
for sh in "tinyllama 1,2,4,8 100" "llama3-8b 1,8 90"; do
  set -- $sh
  NBX_DEBUG=1 timeout -k 5 $3 node dist/src/cli/nbx.js bench decode --device cuda --shape $1 --batch $2 --peers none --ttft-samples 1 > $L/$1.log 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "decode steps take|composite|^nbx [a-z0-9-]+ batch [0-9]+:|^\| [A-Z]" $L/$1.log >> $S
done
for b in 8 1; do
  NBX_DECODE_STEP_TRACE=1 timeout -k 5 60 node scripts/decode-step-check.mjs --shape tinyllama --batch $b --steps 24 --modes off,fused > $L/trace-b$b.log 2>&1
  echo "trace batch $b rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^(trace|fused|off)" $L/trace-b$b.log >> $S
done
# the same kernel with its inputs staged through registers (A/B of the bulk copies), forced at batch 1 and 8
NBX_DECODE_STEP=fused NBX_DECODE_STEP_BULK=0 timeout -k 5 60 node dist/src/cli/nbx.js bench decode --device cuda --shape tinyllama --batch 1,8 --peers none --ttft-samples 1 > $L/nobulk.log 2>&1
echo "nobulk rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^nbx [a-z0-9-]+ batch [0-9]+:" $L/nobulk.log >> $S
# batch 8 forced through the kernel with one query head an attention item (the default there: two of one KV group)
NBX_DECODE_STEP=fused NBX_DECODE_STEP_HEADS=1 timeout -k 5 40 node dist/src/cli/nbx.js bench decode --device cuda --shape tinyllama --batch 8 --peers none --ttft-samples 1 > $L/heads1.log 2>&1
echo "heads1 rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^nbx [a-z0-9-]+ batch [0-9]+:" $L/heads1.log >> $S
(cd $OUT && tar czf dec3.tgz dec3 && rm -rf dec3)
for q in ${QUEUED:-}; do
  [ -f scripts/$q ] || continue
  bash scripts/$q > $OUT/$q.log 2>&1
  echo "$q rc=$? at $(( $(date +%s) - T0 ))s" >> $S
  d=${q%.sh}; d=${d#gpu-}; (cd $OUT && tar czf $d.tgz $d $q.log 2>/dev/null && rm -rf $d $q.log)
done
