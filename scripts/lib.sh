# Shared by scripts/demo, scripts/test and scripts/bench; sourced, not run.
#
# Every script builds into a folder of the repository root (build/, build-asan/, build-tsan/),
# whatever the caller's working directory; OPSCOPE_BUILD_DIR=NAME uses NAME, NAME-asan and
# NAME-tsan instead (a folder name relative to the root). The release build in build/ is configured the same
# way by every script (tests, benchmarks and examples on), so switching between scripts never
# reconfigures it; each script only builds the targets it needs.

OPSCOPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Two cores are the norm on the machines this runs on; override with OPSCOPE_JOBS=N.
OPSCOPE_JOBS="${OPSCOPE_JOBS:-2}"
OPSCOPE_BUILD_DIR="${OPSCOPE_BUILD_DIR:-build}"

# shellcheck disable=SC2034  # used by the scripts that source this file
OPSCOPE_RELEASE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DOPSCOPE_BUILD_TESTS=ON
  -DOPSCOPE_BUILD_BENCHMARKS=ON
  -DOPSCOPE_BUILD_EXAMPLES=ON
  -DOPSCOPE_BUILD_STATIC=ON    # libopscope.a too (the same objects), for its consumer test
  -DOPSCOPE_SANITIZE=
)

opscope_log() { printf '==> %s\n' "$*" >&2; }

# opscope_configure BUILD_DIR [cmake args...]
# Configures BUILD_DIR (relative to the repository root unless absolute). A new build folder
# uses Ninja when it is installed; an existing one keeps the generator it was made with.
opscope_configure() {
  local dir="$1"; shift
  [[ "$dir" = /* ]] || dir="$OPSCOPE_ROOT/$dir"
  local gen=()
  if [[ ! -f "$dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    gen=(-G Ninja)
  fi
  # ccache: a second run of the scripts recompiles only what changed since the first (each
  # configuration has its own flags, so a first run from scratch gains nothing from it).
  if command -v ccache >/dev/null 2>&1; then
    gen+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  opscope_log "configure $dir"
  cmake -S "$OPSCOPE_ROOT" -B "$dir" "${gen[@]}" "$@"
}

# opscope_build BUILD_DIR [target...]   (no target: everything)
opscope_build() {
  local dir="$1"; shift
  [[ "$dir" = /* ]] || dir="$OPSCOPE_ROOT/$dir"
  local targets=()
  if [[ $# -gt 0 ]]; then targets=(--target "$@"); fi
  opscope_log "build $dir${*:+ ($*)}"
  cmake --build "$dir" --parallel "$OPSCOPE_JOBS" "${targets[@]}"
}

# The Google Benchmark programs of the source tree, one per bench/*_bench.cpp.
opscope_bench_names() {
  local src
  for src in "$OPSCOPE_ROOT"/bench/*_bench.cpp; do
    [[ -e "$src" ]] || continue
    basename "$src" .cpp
  done
}

# Prints the comment block at the top of a script (its usage).
opscope_usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
}
