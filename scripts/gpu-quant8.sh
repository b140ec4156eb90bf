#!/usr/bin/env bash
# quant helper, tenth session, first call (code at the commit READY names; no kernel change since quant-7's
# d1436ff: this call only measures). Where the quantized 8B decode step's time goes, by the numbers we lack:
# (1) the tuned GEMV at the decode's own shapes (N x K: qkv 6144x4096, o 4096x4096, gate_up 28672x4096,
#     down 4096x14336, lm_head 128256x4096) for int4, int8, q4_k and q6_k (Q4_K_M's v / down / lm_head),
#     next to bf16 at each shape; (2) the GEMV table + Llama-3-8B decode as every call runs it (default
#     programmatic dependent launch); (3) the same decode with NBX_CUDA_PDL=0 (no overlap between kernels):
#     what the overlap is worth per scheme. <= 98 s of step limits + 3 s of kill grace;
#     results in $OUT/quant8, summary in $OUT/quant8/summary.txt.
QUANT_DIR=quant8 source scripts/lib/quant-run.sh
qstep bench 38 --formats int4,int8,q4_k --budget-s 30 --json "$R/bench.json"
NBX_CUDA_PDL=0 qstep pdl0 33 --no-gemv --formats int4,int8,q4_k --budget-s 28
qstep shapes 27 --no-decode --formats int4,int8,q4_k,q6_k --shapes 6144x4096,4096x4096,28672x4096,4096x14336,128256x4096 --budget-s 24 --json "$R/shapes.json"
{
  echo "== GEMV (tuner's choice) and decode, default PDL"; grep -E "roofline|GB/s|tok/s|failed|skipped|rc=" "$R/bench.log"
  echo "== decode with NBX_CUDA_PDL=0"; grep -E "tok/s|failed|skipped|rc=" "$R/pdl0.log"
  echo "== GEMV at the decode's shapes (N x K)"; grep -E "roofline|GB/s|failed|skipped|rc=" "$R/shapes.log"
} > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
