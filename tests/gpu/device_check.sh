#!/usr/bin/env bash
# The one command the GPU machine runs (issue 35): the CUPTI backend on a real GPU, PyTorch's
# profiler beside it, and both traces read by `opscope analyze`. Made to be run by the device
# tool from the repository root, over the bundle tests/gpu/make_bundle.sh built here:
#
#   tests/gpu/device_check.sh [BUNDLE_DIR] [OUT_DIR]     (defaults: gpu-bundle, $OUT or gpu-out)
#
# Never stops at the first failure: every stage runs under its own `timeout`, inside an overall
# deadline (DEVICE_CHECK_DEADLINE_S, 300 s); a watchdog says which stage a hang is in. Prints,
# in order: the environment, what opscope's default CUPTI search finds, launch_check's checks
# and launch costs, `opscope analyze` of our trace, PyTorch's run, `opscope analyze` of torch's
# trace, the two traces side by side, and a verdict line per stage. Without a GPU (a dry run
# here) every stage goes through in seconds and says "no CUDA driver".
#
# Leaves at most 8 flat files in OUT_DIR: device_check.log, opscope_trace.json.gz,
# opscope_launch.json, analyze.txt, summary.txt, torch/torch_trace.json.gz,
# torch/torch_table.txt, torch/torch_launch.json.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(cd "${1:-$root/gpu-bundle}" && pwd) || { echo "no bundle: run tests/gpu/make_bundle.sh"; exit 2; }
out=${2:-${OUT:-$root/gpu-out}}
mkdir -p "$out/torch"
deadline=${DEVICE_CHECK_DEADLINE_S:-300}
log=$out/device_check.log
exec > >(stdbuf -oL tee -a "$log") 2>&1
began=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
opscope=$bundle/bin/opscope
python=${PYTHON:-python3}

elapsed() { echo $(( $(date +%s) - began )); }
stage_file=$out/.stage
echo "start" >"$stage_file"
# The watchdog: every 20 s, the stage that is running and for how long.
( while sleep 20; do
    [[ -f "$stage_file" ]] || exit 0
    echo "--- watchdog: t+$(elapsed)s, in stage: $(cat "$stage_file" 2>/dev/null)"
  done ) &
watchdog=$!
trap 'kill $watchdog 2>/dev/null; rm -f "$stage_file"' EXIT

declare -a verdicts=()
# stage NAME LIMIT_S COMMAND...: runs COMMAND under `timeout`, within what is left of the deadline.
stage() {
  local name=$1 limit=$2; shift 2
  local left=$(( deadline - $(elapsed) ))
  (( limit > left )) && limit=$left
  if (( limit <= 5 )); then
    echo "=== [t+$(elapsed)s] $name: SKIPPED (the ${deadline}s deadline is spent)"
    verdicts+=("$name: skipped (deadline)")
    return
  fi
  echo "$name" >"$stage_file"
  echo "=== [t+$(elapsed)s] $name (limit ${limit}s)"
  timeout -k 5 "$limit" "$@"
  local rc=$?
  case $rc in
    0) verdicts+=("$name: ok") ;;
    124|137) verdicts+=("$name: TIMED OUT after ${limit}s") ;;
    *) verdicts+=("$name: exit $rc") ;;
  esac
  echo "=== [t+$(elapsed)s] $name: exit $rc"
}

environment() {
  nvidia-smi || echo "(no nvidia-smi)"
  ldd --version | head -1
  uname -a
  echo "--- every libcupti on the machine:"
  find /usr /opt /lib /lib64 /root /home /venv -name 'libcupti.so*' 2>/dev/null | sort
  echo "--- the bundle:"
  cat "$bundle/BUILD"
  ldd "$bundle/bin/opscope" "$bundle/bin/launch_check"
  "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
}

# What opscope finds by default (no OPSCOPE_CUPTI_LIBRARY; the bundle's CUPTI is off the
# loader's path): the machine's own CUPTI. Then with Python's prefix as VIRTUAL_ENV, as in an
# activated venv: PyTorch's wheel's.
probe() {
  "$opscope" activities
  "$opscope" activities --json
  echo "--- with Python's environment as VIRTUAL_ENV (PyTorch's wheels):"
  VIRTUAL_ENV="$("$python" -c 'import sys; print(sys.prefix)' 2>/dev/null)" \
    "$opscope" activities | sed -n '/CUDA probe/,$p'
}

# launch_check, CUDA recorded where opscope finds it by default; when the default search finds no CUPTI, again with the
# bundle's.
launch_check() {
  "$bundle/bin/launch_check" "$out/opscope_trace.json.gz" \
    "$out/opscope_launch.json" | tee "$out/.launch_check.txt"
  local rc=${PIPESTATUS[0]}
  if grep -q "no CUPTI" "$out/.launch_check.txt" && ! grep -q "no CUDA driver" "$out/.launch_check.txt"; then
    echo "--- the default search found no CUPTI: again with the bundle's"
    OPSCOPE_CUPTI_LIBRARY=$bundle/lib/cupti/libcupti.so.13 "$bundle/bin/launch_check" "$out/opscope_trace.json.gz" "$out/opscope_launch.json"
    rc=$?
  fi
  rm -f "$out/.launch_check.txt"
  return "$rc"
}

analyze() {  # TRACE LABEL
  [[ -f "$1" ]] || { echo "no trace $1"; return 1; }
  {
    echo "##### opscope analyze $2"
    "$opscope" analyze "$1" --report temporal,idle,kernels,launch,queue
  } 2>&1 | tee -a "$out/analyze.txt"
  return "${PIPESTATUS[0]}"
}

compare() {
  [[ -f "$out/opscope_trace.json.gz" && -f "$out/torch/torch_trace.json.gz" ]] ||
    { echo "a trace is missing: nothing to compare"; return 1; }
  "$python" "$root/tests/gpu/compare_traces.py" "$out/opscope_trace.json.gz" \
    "$out/torch/torch_trace.json.gz" --out "$out/summary.txt"
}

stage environment 40 bash -c "$(declare -f environment); bundle=$bundle python=$python; environment"
stage probe 20 bash -c "$(declare -f probe); opscope=$opscope python=$python; probe"
stage launch_check 90 bash -c "$(declare -f launch_check); bundle=$bundle out=$out; launch_check"
# A change to the hot path is measured before and after in the same run: BUNDLE-before/ (when
# there is one) holds launch_check linked against the library before the change.
if [[ -x "$bundle-before/bin/launch_check" ]]; then
  cat "$bundle-before/BUILD"
  stage launch_costs_before 60 env LD_LIBRARY_PATH="$bundle-before/lib:$LD_LIBRARY_PATH" \
    "$bundle-before/bin/launch_check" /dev/null
fi
stage analyze_opscope 30 bash -c "$(declare -f analyze); opscope=$opscope out=$out; analyze $out/opscope_trace.json.gz opscope"
stage torch 120 "$python" "$root/tests/gpu/torch_side.py" "$out/torch"
stage analyze_torch 30 bash -c "$(declare -f analyze); opscope=$opscope out=$out; analyze $out/torch/torch_trace.json.gz torch"
stage compare 30 bash -c "$(declare -f compare); python=$python root=$root out=$out; compare"
rm -f "$stage_file"
echo "=== verdict (t+$(elapsed)s)"
printf '  %s\n' "${verdicts[@]}"
if printf '%s\n' "${verdicts[@]}" | grep -qv ': ok$'; then echo "DEVICE CHECK: SOME STAGES FAILED"; exit 1; fi
echo "DEVICE CHECK: ALL STAGES OK"
