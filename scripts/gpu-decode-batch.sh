#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-quant5.sh gpu-attn5.sh" bash scripts/gpu-decode-batch.sh (eighth session, prepared, not run): the batch-N whole-step kernel after the barrier-counter / bank-conflict / spill fixes: tests,
# tok/s at batch 1-8 (TinyLlama) and 1, 8 (8B) with the auto path's timings, the 10,000-step soak (batches joining and
# leaving, rows isolated), then the helpers' quant-5 / attn-5 if queued
set -u
T0=$(date +%s)
S=$OUT/summary.txt
L=$OUT/dec; mkdir -p $L
export NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-c4-XXXXXX)
timeout -k 5 120 node --test dist/test/decode_step.test.js dist/test/static_decode.test.js > $L/tests.log 2>&1
echo "tests rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "^(not ok|# pass|# fail)" $L/tests.log >> $S; grep -A14 "^not ok" $L/tests.log | head -40 >> $S
for sh in "tinyllama 1,2,4,8 100"; do
  set -- $sh
  NBX_DEBUG=1 timeout -k 5 $3 node dist/src/cli/nbx.js bench decode --device cuda --shape $1 --batch $2 --peers none --ttft-samples 1 > $L/$1.log 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E "decode steps take|composite|^nbx [a-z0-9-]+ batch [0-9]+:|^\| [A-Z]" $L/$1.log >> $S
done
timeout -k 5 110 node scripts/soak-decode.mjs --device cuda --shape tinyllama --steps 10000 --isolation 6 --json $L/dsoak.json > $L/dsoak.log 2>&1
echo "dsoak rc=$? at $(( $(date +%s) - T0 ))s" >> $S; grep -E '^(round +(6|30|60|90|120|150|180) |isolation|decode soak)' $L/dsoak.log >> $S; tail -3 $L/dsoak.log >> $S
(cd $OUT && tar czf dec.tgz dec && rm -rf dec)
for q in ${QUEUED:-}; do
  [ -f scripts/$q ] || continue
  bash scripts/$q > $OUT/$q.log 2>&1
  echo "$q rc=$? at $(( $(date +%s) - T0 ))s" >> $S
  d=${q%.sh}; d=${d#gpu-}; (cd $OUT && tar czf $d.tgz $d $q.log 2>/dev/null && rm -rf $d $q.log)
done
