# Shared by the scripts/gpu-*.sh device scripts: `dist_stale SRC...` succeeds when dist/ must be rebuilt
# (no CLI build, or one of the given sources, e.g. src/ops/nn, newer than its compiled .js). A device
# session that carries a fresh dist sets NBX_DIST_PREBUILT (the GPU machine has no compiler).
dist_stale() {
  [ -n "${NBX_DIST_PREBUILT:-}" ] && return 1
  [ -f dist/src/cli/nbx.js ] || return 0
  local f
  for f in "$@"; do
    { [ -f "dist/$f.js" ] && [ ! "$f.ts" -nt "dist/$f.js" ]; } || return 0
  done
  return 1
}
