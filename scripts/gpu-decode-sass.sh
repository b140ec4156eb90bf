#!/usr/bin/env bash
# run: source .gpu/bootstrap.sh && bash scripts/gpu-decode-sass.sh (twelfth session, call 3): why the whole-step kernel's
# packed products run at ~2.6 TB/s (Llama-3-8B, int4 g128 with its lm_head): Nsight Compute's warp stall reasons
# (per issued instruction) and its per-SASS-instruction source page (instructions executed and stall samples per line),
# so the item loop's instruction count and stalls can be read against the source.
DEC_DIR=decs source scripts/lib/decode-run.sh
NCU=/usr/local/cuda/bin/ncu; [ -x "$NCU" ] || NCU=ncu
run_ncu() { # NAME ARGS...
  local n=$1; shift
  NBX_DECODE_STEP=fused timeout -k 5 150 "$NCU" --kernel-name decode_step --launch-skip 2 --launch-count 1 "$@" \
    node scripts/decode-step-check.mjs --shape llama3-8b --quant int4-g128+lm --batch 1 --steps 4 --prompt 64 --modes fused > "$L/$n" 2>&1
  at "ncu $n" $?
}
run_ncu stalls.txt --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
grep -E "stalled|Issued|Eligible|Duration" "$L/stalls.txt" | sort -k3 -n -r | head -40 >> "$S"
run_ncu source.csv --section SourceCounters --page source --print-source sass --csv
wc -l "$L/source.csv" >> "$S"
dec_pack
