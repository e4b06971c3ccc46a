"""Builds opscope._C with the project's CMake, for `pip install --no-build-isolation ./python`.

The extension is the CMake target opscope_python (python/CMakeLists.txt); this file only runs
CMake on the repository (the parent of this folder) and copies the module where setuptools
wants it. OPSCOPE_CMAKE_BUILD_DIR reuses an existing build folder instead of a fresh one;
OPSCOPE_CMAKE_ARGS adds CMake arguments.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(os.environ.get("OPSCOPE_CMAKE_BUILD_DIR") or Path(self.build_temp) / "cmake")
        build_dir = build_dir.resolve()
        configure = [
            "cmake", "-S", str(REPOSITORY), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            # Only the extension is needed here: no tests, benchmarks, examples or tools.
            "-DOPSCOPE_BUILD_TESTS=OFF", "-DOPSCOPE_BUILD_BENCHMARKS=OFF",
            "-DOPSCOPE_BUILD_EXAMPLES=OFF", "-DOPSCOPE_BUILD_TOOLS=OFF",
            "-DOPSCOPE_BUILD_PYTHON=ON",
        ]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("OPSCOPE_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(
            ["cmake", "--build", str(build_dir), "--target", "opscope_python", "-j", jobs],
            check=True,
        )
        built = sorted((build_dir / "python" / "opscope").glob("_C*.so"))
        if not built:
            raise RuntimeError(f"the CMake build left no opscope/_C*.so in {build_dir}/python")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)
        # The C API header, where opscope.get_include() looks for it.
        header = target.parent / "include" / "opscope" / "python_capi.h"
        header.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "include" / "opscope" / "python_capi.h", header)


setup(ext_modules=[Extension("opscope._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
