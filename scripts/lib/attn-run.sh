# Shared set-up of the attention device scripts: sourced with ATTN_DIR set (the logs' folder under $OUT); gives L (that
# folder), S (its summary.txt, emptied, headed by the commit), step.sh's `st`, and the environment the checks assume.
set -u
OUT=${OUT:-/tmp/out}
L="$OUT/$ATTN_DIR"; mkdir -p "$L"
S="$L/summary.txt"; : > "$S"
source scripts/lib/step.sh
export NBX_CUDA_HOST_STAGING=0 NBX_ATTENTION_WGMMA=1 UV_THREADPOOL_SIZE=16
export NBX_CACHE_DIR; NBX_CACHE_DIR=$(mktemp -d /tmp/nbx-attn-XXXXXX)
git log --oneline -1 >> "$S" 2>/dev/null
# The summary's sections, one a step's log (the device scripts' closing block):
#   sum_check EXTRA_PATTERN   the check's verdict lines and its EXTRA_PATTERN cases
#   sum_bench NAME ROWS       the bench's last ROWS table rows and its notices
#   sum_tuned WIDTH           the tuner's sweeps, cut at WIDTH characters
#   sum_time NAME             a forced-timing step's lines
sum_check() { echo "== check"; grep -E '^(FAIL|precompiled|check:|device:)' "$L/check.log"; grep -E "$1" "$L/check.log" | head -8 | cut -c1-600; grep -iE 'error' "$L/check.log" | head -5; }
sum_bench() { echo "== $1"; grep -E '^\|' "$L/$1.log" | tail -"$2"; grep -E 'compiled or found|autotuning|failed|FAILED|rror' "$L/$1.log" | head -8; }
sum_tuned() { echo "== tuned"; grep -E '^tuned' "$L/tuned.log" | cut -c1-"$1"; }
sum_time() { echo "== $1"; grep -E '^(time|host|precompiled)' "$L/$1.log"; grep -iE 'error' "$L/$1.log" | head -5; }
