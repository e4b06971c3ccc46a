"""Builds opscope._C with the project's CMake, for `pip install --no-build-isolation ./python`.

The extension is the CMake target opscope_python (python/CMakeLists.txt); this file only runs
CMake on the repository (the parent of this folder) and copies the module where setuptools
wants it, with the libopscope.so it links (the package finds it beside _C). OPSCOPE_CMAKE_BUILD_DIR
reuses an existing build folder instead of a fresh one, as it is configured (a relative path is
taken from the directory pip was run in); OPSCOPE_CMAKE_ARGS adds CMake arguments.
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


def user_build_dir():
    """OPSCOPE_CMAKE_BUILD_DIR as an absolute path, or None.

    pip runs this file with the package folder as its working directory, so a relative path
    is resolved against the shell's $PWD (the directory the user ran pip in), which pip and
    its build backend inherit unchanged.
    """
    given = os.environ.get("OPSCOPE_CMAKE_BUILD_DIR")
    if not given:
        return None
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = Path(os.environ.get("PWD") or os.getcwd()) / path
    return path.resolve()


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = user_build_dir()
        reuse = build_dir is not None and (build_dir / "CMakeCache.txt").exists()
        if build_dir is None:
            build_dir = (Path(self.build_temp) / "cmake").resolve()
        if reuse:
            print(f"opscope: building opscope._C in the existing build folder {build_dir}")
        else:
            configure = [
                "cmake", "-S", str(REPOSITORY), "-B", str(build_dir),
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython3_EXECUTABLE={sys.executable}",
                # Only the extension is needed here: no tests, benchmarks, examples or tools.
                "-DOPSCOPE_BUILD_TESTS=OFF", "-DOPSCOPE_BUILD_BENCHMARKS=OFF",
                "-DOPSCOPE_BUILD_EXAMPLES=OFF", "-DOPSCOPE_BUILD_TOOLS=OFF",
                "-DOPSCOPE_BUILD_PYTHON=ON",
            ]
            if shutil.which("ninja"):
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
            raise RuntimeError(
                f"the CMake build left no opscope/_C*.so in {build_dir}/python "
                "(is OPSCOPE_BUILD_PYTHON on there, and were python3-dev and pybind11-dev found?)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)
        # The shared library _C links, under its soname, beside _C (its rpath has $ORIGIN).
        sonames = [p for p in (build_dir / "src").glob("libopscope.so.*") if p.name.count(".") == 3]
        if len(sonames) != 1:
            raise RuntimeError(f"expected one libopscope.so.MAJOR.MINOR in {build_dir}/src")
        shutil.copyfile(sonames[0].resolve(), target.parent / sonames[0].name)
        # The C API header, where opscope.get_include() looks for it.
        header = target.parent / "include" / "opscope" / "python_capi.h"
        header.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "include" / "opscope" / "python_capi.h", header)


setup(ext_modules=[Extension("opscope._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
