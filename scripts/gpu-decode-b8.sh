#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-quant6.sh gpu-attn6.sh" bash scripts/gpu-decode-b8.sh (ninth session, call 2): the
# whole-step kernel after its inputs became cp.async loads (norm, down's activation) and the attention merge loads ahead: tests,
# tok/s at batch 1-8 (TinyLlama) and 1, 8 (8B) with the auto path's timings, a per-phase trace at batch 8 and 1, then the
# helpers' device scripts if queued. Logs under $OUT/dec2 (tarred), summary in $OUT/summary.txt.
set -u
T0=$(date +%s)
S=$OUT/summary.txt
L=$OUT/dec2; mkdir -p $L
export NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-c2-XXXXXX)
git log --oneline -1 >> $S 2>/dev/null
timeout -k 5 120 node --test dist/test/decode_step.test.js dist/test/static_decode.test.js > $L/tests.log 2>&1
echo "tests rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^(not ok|# pass|# fail)" $L/tests.log >> $S; grep -A14 "^not ok" $L/tests.log | head -40 >> $S
for sh in "tinyllama 1,2,4,8 100" "llama3-8b 1,8 90"; do
  set -- $sh
  NBX_DEBUG=1 timeout -k 5 $3 node dist/src/cli/nbx.js bench decode --device cuda --shape $1 --batch $2 --peers none --ttft-samples 1 > $L/$1.log 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "decode steps take|composite|^nbx [a-z0-9-]+ batch [0-9]+:|^\| [A-Z]" $L/$1.log >> $S
done
for b in 8 1; do
  NBX_DECODE_STEP_TRACE=1 timeout -k 5 60 node scripts/decode-step-check.mjs --shape tinyllama --batch $b --steps 24 --modes off,fused > $L/trace-b$b.log 2>&1
  echo "trace batch $b rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^(trace|fused|off)" $L/trace-b$b.log >> $S
done
# batch 8 through the kernel with 2 blocks a head in the attention phase (the default there is 1: 256 items, two rounds of the grid)
NBX_DECODE_STEP=fused NBX_DECODE_STEP_ASPLIT=2 timeout -k 5 40 node dist/src/cli/nbx.js bench decode --device cuda --shape tinyllama --batch 8 --peers none --ttft-samples 1 > $L/b8-asplit2.log 2>&1
echo "b8 fused asplit 2 rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^nbx [a-z0-9-]+ batch [0-9]+:" $L/b8-asplit2.log >> $S
(cd $OUT && tar czf dec2.tgz dec2 && rm -rf dec2)
for q in ${QUEUED:-}; do
  [ -f scripts/$q ] || continue
  bash scripts/$q > $OUT/$q.log 2>&1
  echo "$q rc=$? at $(( $(date +%s) - T0 ))s" >> $S
  d=${q%.sh}; d=${d#gpu-}; (cd $OUT && tar czf $d.tgz $d $q.log 2>/dev/null && rm -rf $d $q.log)
done
