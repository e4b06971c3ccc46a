#!/usr/bin/env bash
# Builds what the GPU machine runs (tests/gpu/device_check.sh) into an install-style bundle:
#
#   tests/gpu/make_bundle.sh [BUNDLE_DIR]        (default: gpu-bundle, git-ignored)
#
#   BUNDLE_DIR/bin/opscope        the command line (RUNPATH $ORIGIN/../lib)
#   BUNDLE_DIR/bin/launch_check   tests/gpu/launch_check.cu, nvcc -arch=sm_90 (H100/H200)
#   BUNDLE_DIR/lib/               libopscope.so and the Debian libraries ldd shows it needs
#                                 (fmt, simdjson, libdeflate, zlib)
#   BUNDLE_DIR/lib/cupti/         CUPTI 13 from the toolkit: a fallback, off the loader's path,
#                                 so that the run shows what opscope finds on the machine itself
#   BUNDLE_DIR/lib/fallback/      libstdc++ and libgcc_s, for a machine whose own are older
#   BUNDLE_DIR/BUILD              what was built, from which commit, with which toolkit
#
# A Release build with CUPTI on and no tests, benchmarks, examples or Python, in build-gpu/.
# The device machine has no package registry and takes at most 64 MiB of working tree: the
# build tree (absolute symlinks, objects) would not travel; this bundle (about 11 MB) does,
# named in the device tool's `carry`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${1:-$root/gpu-bundle}
cuda=${CUDA_HOME:-/usr/local/cuda}
build=$root/build-gpu
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DOPSCOPE_BUILD_TESTS=OFF -DOPSCOPE_BUILD_BENCHMARKS=OFF -DOPSCOPE_BUILD_EXAMPLES=OFF \
  -DOPSCOPE_BUILD_PYTHON=OFF -DOPSCOPE_CUPTI=ON >/dev/null
cmake --build "$build" --parallel "${OPSCOPE_JOBS:-2}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/fallback" "$bundle/lib/cupti"
cp "$build/tools/opscope" "$bundle/bin/"
cp -L "$build/src/libopscope.so" "$bundle/lib/$(objdump -p "$build/src/libopscope.so" | awk '/SONAME/ {print $2}')"
"$cuda/bin/nvcc" -std=c++20 -O2 -arch=sm_90 -diag-suppress 1835 -I"$root/include" \
  "$root/tests/gpu/launch_check.cu" -o "$bundle/bin/launch_check" \
  -L"$build/src" -lopscope -Xlinker -rpath -Xlinker '$ORIGIN/../lib'
# The libraries opscope needs besides glibc's and the compiler's own.
ldd "$bundle/bin/opscope" "$build/src/libopscope.so" | awk '$3 ~ /^\// {print $3}' | sort -u |
  while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libopscope*) ;;
      libstdc++.so*|libgcc_s.so*) cp -L "$lib" "$bundle/lib/fallback/" ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
cp -L "$cuda/lib64/libcupti.so.13" "$bundle/lib/cupti/" 2>/dev/null ||
  cp -L "$cuda/extras/CUPTI/lib64/libcupti.so.13" "$bundle/lib/cupti/"
{
  echo "commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(g++ --version | head -1)"
  echo "nvcc $("$cuda/bin/nvcc" --version | awk '/release/ {print $5 $6}')"
  echo "cupti $(readlink -f "$cuda/lib64/libcupti.so.13" 2>/dev/null | xargs -r basename)"
} >"$bundle/BUILD"
du -sh "$bundle"
cat "$bundle/BUILD"
