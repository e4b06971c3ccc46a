#!/usr/bin/env bash
# For a GPU machine with the CUDA toolkit and a build tree of opscope (Release, with CUPTI's
# headers): builds tests/gpu/launch_check.cu against it, runs it, and reads its trace with
# `opscope analyze`. (A machine without build tools runs tests/gpu/device_check.sh over the
# bundle of make_bundle.sh instead.)
#
#   tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, build/gpu-run)
#
# Prints the checks, the launch costs and the temporal breakdown; exits non-zero when a check
# fails. The first window's trace is left in OUT_DIR/gpu_trace.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/gpu-run}
mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$nvcc" -std=c++20 -O2 -I"$root/include" "$root/tests/gpu/launch_check.cu" -o "$out/launch_check" \
  -L"$build/src" -lopscope -Xlinker -rpath -Xlinker "$build/src"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
"$out/launch_check" "$out/gpu_trace.json"
"$build/tools/opscope" analyze "$out/gpu_trace.json" --report temporal,kernels
