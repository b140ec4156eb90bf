# Shared by the scripts/gpu-*.sh device scripts: `st NAME TIMEOUT CMD...` echoes what runs into the
# summary $S, runs it under a hard limit (SIGKILL 5 s after SIGTERM) with its output in $L/NAME.log,
# keeps going after a failure, and records the exit code and seconds. Callers set S and L.
st() {
  local n=$1 to=$2; shift 2
  local t0; t0=$(date +%s%N)
  echo "+ $*" | tee -a "$S"
  timeout -k 5 "$to" "$@" > "$L/$n.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s rc=%d %d.%01ds\n' "$n" "$rc" $((ms / 1000)) $(((ms % 1000) / 100)) | tee -a "$S"
}
