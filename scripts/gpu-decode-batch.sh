#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && QUEUED="gpu-quant5.sh gpu-attn5.sh" bash scripts/gpu-decode-batch.sh (ninth session, call 1): the
# batch-N whole-step kernel after the barrier-counter / bank-conflict / spill fixes (9d8db3c): tests, tok/s at batch 1-8
# (TinyLlama) with the auto path's timings, the 10,000-step soak (batches joining and leaving, rows isolated), then the
# queued scripts.
DEC_DIR=dec source scripts/lib/decode-run.sh
dec_tests 120
dec_bench tinyllama 1,2,4,8 100
timeout -k 5 110 node scripts/soak-decode.mjs --device cuda --shape tinyllama --steps 10000 --isolation 6 --json "$L/dsoak.json" > "$L/dsoak.log" 2>&1
at dsoak $?; grep -E '^(round +(6|30|60|90|120|150|180) |isolation|decode soak)' "$L/dsoak.log" >> "$S"; tail -3 "$L/dsoak.log" >> "$S"
dec_finish
