#!/usr/bin/env bash
# (NBX_DECODE_STEP_H16 and the float16 forms it chose were reverted in 4fff63f; run this against the dist of the commit named below.)
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-h16b.sh (thirteenth session, call 2): why float16 operands
# made the packed step slower: the SASS of locally built cubins (sassin/, if present) and the phase traces of the
# int4+lm step, H16 sum against off.
DEC_DIR=dech16b source scripts/lib/decode-run.sh
for c in sassin/*.cubin; do [ -f "$c" ] && /usr/local/cuda/bin/cuobjdump -sass "$c" | gzip > "$L/$(basename "$c" .cubin).sass.gz"; done
for v in sum off; do
  dec_fresh; NBX_DECODE_STEP_H16=$v NBX_DECODE_STEP_TRACE=1 timeout -k 5 90 node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128+lm --modes off,fused --steps 8 > "$L/trace-$v.log" 2>&1
  at "trace $v" $?; grep -E "^(trace|fused)" "$L/trace-$v.log" >> "$S"
done
dec_pack
