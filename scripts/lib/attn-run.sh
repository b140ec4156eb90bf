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
