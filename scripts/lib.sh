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

# ctest in BUILD_DIR with the scripts' parallelism; on failure, the failures' own lines
# (failure_digest) are printed and appended to the file $digest names, when set (scripts/test
# repeats them after its summary).
run_ctest() {  # BUILD_DIR [ctest arguments...]
  ctest --test-dir "$OPSCOPE_ROOT/$1" --output-on-failure --no-tests=error -j "$OPSCOPE_JOBS" \
    "${@:2}" && return 0
  local rc=$?
  failure_digest "$1" | tee -a "${digest:-/dev/null}"
  return $rc
}

# What each failed test of BUILD_DIR's last ctest run said that names the failure (gtest's and
# pytest's failure lines, else the output's last lines): repeated after the summary, where a
# reader of a long log (CI's tail) looks first.
failure_digest() {  # BUILD_DIR
  local log="$OPSCOPE_ROOT/$1/Testing/Temporary/LastTest.log"
  [[ -f "$log" ]] || return 0
  echo "==> failed tests in $1:"
  awk '
    BEGIN { failure = "^(FAILED|ERROR) |^E   |\\[  FAILED  \\]|Failure$|: error:|^Expected|^  Actual|Which is:|Value of:" }
    / Testing: / { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); n = 0; keep = 0; next }
    /^<end of output>$/ { out = 0; next }
    /^Output:$/ { out = 1; getline; next }
    out { lines[++n] = $0; if ($0 ~ failure) keep++; next }
    /^Test (Failed|Timeout|Skipped|Passed)/ || /^Test .*(Failed|Exception|Timeout)/ {
      if ($0 ~ /Passed|Skipped/) next
      printf "--- %s (%s)\n", name, $0
      shown = 0
      for (i = 1; i <= n; i++) {
        if (keep == 0 && i <= n - 15) continue
        if (keep > 0 && lines[i] !~ failure) continue
        if (++shown > 40) { print "    ..."; break }
        print "    " lines[i]
      }
    }' "$log"
}
