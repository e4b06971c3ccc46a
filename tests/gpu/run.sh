#!/usr/bin/env bash
# Issue 20's GPU run: builds tests/gpu/launch_check.cu against a built opscope (Release, with
# CUPTI's headers) and runs it with the CUPTI backend switched on, then reads its trace with
# `opscope analyze`. For a machine with an NVIDIA GPU, the CUDA toolkit and a build of opscope:
#
#   tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, build/gpu-run)
#
# Prints the checks, the launch overhead and the temporal breakdown; exits non-zero when a
# check fails. The trace is left in OUT_DIR/gpu_trace.json for tests/data/gpu/.
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
