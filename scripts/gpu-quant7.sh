#!/usr/bin/env bash
# quant helper, ninth session (code at the commit READY names). New since quant-6: knob bk of the xf kernel (int4, int8,
# q4_k; whole 32-unit stripes, 16-byte aligned rows): the weight stream through a per-warp ring of bk stages in shared
# memory filled by bulk copies (cp.async.bulk + mbarrier expect_tx; lane 0 copies one stripe of each of the warp's rows,
# 512 B (q4_k 576 B), and int4's stripe scales), no registers holding bytes in flight; alone (per tile, kw as given) and
# with pg (persistent grid, kw 1: x staged once per resident block, the warp's ring runs on across its tiles).
# Why: quant-6's loads-only rows (ab2) of the register kernel ran no faster than the whole kernel (int4 1,919-2,128 GB/s).
# (1) check on the card: the bk cases only (int4 sym/asym, int8, q4_k; per tile and pg), (2) sweep: each format's current
# best vs bk forms, with ab2 (loads only) rows of the old and new forms, (3) GEMV table (tuner's choice; bk is sweep-only)
# + Llama-3-8B decode. <= 100 s of step limits + 3 s of kill grace; results in $OUT/quant7, summary in $OUT/quant7/summary.txt.
# Already run once by the helper on a leased H200 at commit bd099f7 (bk then a tuner candidate; results in quant.md).
QUANT_DIR=quant7 source scripts/lib/quant-run.sh
CFGS='{"int4":[{"kw":2,"nr":4,"db":1},{"kw":1,"nr":2,"db":1,"U":1,"lb":4},{"kw":2,"nr":4,"db":1,"ab":2},{"nr":2,"bk":4,"pg":1},{"nr":2,"bk":8,"pg":1},{"nr":1,"bk":8,"pg":1,"lb":3},{"nr":4,"bk":4,"pg":1},{"kw":2,"nr":2,"bk":4},{"nr":2,"bk":8,"pg":1,"ab":2},{"kw":2,"nr":2,"bk":4,"ab":2}],
"int8":[{"kw":1,"nr":8},{"kw":1,"nr":4,"db":1,"pg":1},{"kw":1,"nr":8,"ab":2},{"nr":2,"bk":4,"pg":1},{"nr":2,"bk":8,"pg":1},{"nr":1,"bk":8,"pg":1,"lb":3},{"nr":2,"bk":8,"pg":1,"ab":2}],
"q4_k":[{"kw":1,"nr":2,"db":1,"U":1},{"kw":1,"nr":1,"db":1,"U":2,"lb":3},{"kw":1,"nr":2,"db":1,"U":1,"ab":2},{"nr":2,"bk":4,"pg":1},{"nr":1,"bk":8,"pg":1,"lb":3},{"nr":2,"bk":8,"pg":1},{"nr":2,"bk":4,"pg":1,"ab":2}]}'
qstep check 20 --check --quick --no-gemv --no-decode --formats int4,int8,q4_k --check-filter=-bk
qstep sweep 42 --formats int4,int8,q4_k --sweep --sweep-cfgs "$CFGS" --no-decode --budget-s 36
qstep bench 38 --formats int4,int8,q4_k --budget-s 30 --json "$R/bench.json"
qsummary "check (bk cases)" "sweep (current best vs bk; /ab2 rows: loads only, wrong results)"
