#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-asplit.sh (thirteenth session, call 6): one block a head in
# the attention phase at Llama-3-8B's shape over the decode benchmark's longer context (128-token prompt, 256 new
# tokens; call 5 timed it over the quant bench's 16 + 64), and the quantized rows with it and a ring of 3 items a warp.
DEC_DIR=decasplit source scripts/lib/decode-run.sh
dec_fresh; dec_bench llama3-8b 1 70 8b-asplit-default
export NBX_DECODE_STEP_ASPLIT=1; dec_fresh; dec_bench llama3-8b 1 70 8b-asplit-1; unset NBX_DECODE_STEP_ASPLIT
dec_quant ring3-asplit1 bf16,int8,int8+lm,int4-g128,int4-g128+lm 80 NBX_DECODE_STEP_RING=3 NBX_DECODE_STEP_ASPLIT=1
dec_pack
