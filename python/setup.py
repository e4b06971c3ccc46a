"""Builds opscope._C with the project's CMake, for `pip install --no-build-isolation ./python`
and `pip wheel --no-build-isolation ./python`.

The extension is the CMake target opscope_python (python/CMakeLists.txt); this file only runs
CMake on the repository (the parent of this folder) and copies the module where setuptools
wants it, with the libopscope.so it links and the libraries that one needs beyond what every
machine with Python has (fmt, simdjson, libdeflate: SYSTEM_LIBRARIES says what stays out), all
in the package folder with RUNPATH $ORIGIN, so the wheel works where those are not installed.
OPSCOPE_CMAKE_BUILD_DIR reuses an existing build folder instead of a fresh one, as it is
configured (a relative path is taken from the directory pip was run in); OPSCOPE_CMAKE_ARGS adds
CMake arguments.

The wheel is tagged linux_x86_64 (setuptools' default), which claims no more than is true: it
needs the glibc and libstdc++ of the machine it was built on, or newer.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent

# The libraries libopscope.so loads that the wheel does not carry (soname prefixes).
SYSTEM_LIBRARIES = (
    # glibc: a process has exactly one, and the platform tag is about it.
    "linux-vdso.so.", "ld-linux", "libc.so.", "libm.so.", "libdl.so.", "libpthread.so.",
    "librt.so.", "libutil.so.", "libresolv.so.",
    # GCC's runtime: an interpreter that loaded any C++ extension (numpy, torch) already has
    # one, and a second libstdc++ in the process would not share exceptions or type information.
    "libstdc++.so.", "libgcc_s.so.",
    # zlib: Python's zlib module links it, and pip needs that module to unpack any wheel.
    "libz.so.",
)

# file(RPATH_SET) edits the RUNPATH entry in place (CMake >= 3.21; no patchelf needed).
SET_RUNPATH = """cmake_minimum_required(VERSION 3.21)
file(RPATH_SET FILE "${FILE}" NEW_RPATH "${RUNPATH}")
"""


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


def libraries_to_carry(library):
    """(soname, path) of each library `library` needs, directly or through another, as this
    machine's loader finds them, less SYSTEM_LIBRARIES."""
    listed = subprocess.run(["ldd", str(library)], check=True, capture_output=True, text=True)
    carried = []
    for line in listed.stdout.splitlines():
        line = line.strip()
        if line.startswith(SYSTEM_LIBRARIES) or line.startswith("/"):
            continue  # the loader itself is listed by its path
        found = re.match(r"^(\S+) => (/\S+) \(0x[0-9a-f]+\)$", line)
        if not found:
            raise RuntimeError(f"ldd {library}: cannot resolve '{line}'")
        carried.append((found.group(1), Path(found.group(2))))
    return carried


def set_runpath(path, runpath, scratch):
    scratch.mkdir(parents=True, exist_ok=True)
    script = scratch / "opscope_set_runpath.cmake"
    script.write_text(SET_RUNPATH)
    done = subprocess.run(["cmake", f"-DFILE={path}", f"-DRUNPATH={runpath}", "-P", str(script)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"cannot set the RUNPATH of {path} to {runpath} (a CMake build of opscope gives "
            f"_C and libopscope.so a RUNPATH entry to edit): {done.stderr.strip()}")


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
        # Libraries an earlier build left in setuptools' build folder would travel too.
        for stale in target.parent.glob("lib*.so*"):
            stale.unlink()
        library = target.parent / sonames[0].name
        shutil.copyfile(sonames[0].resolve(), library)
        # Both look beside themselves first: _C for libopscope.so (its build RUNPATH is the
        # build folder, which a user's machine has not got), libopscope.so for what follows.
        for binary in (target, library):
            set_runpath(binary, "$ORIGIN", Path(self.build_temp))
        for soname, path in libraries_to_carry(sonames[0]):
            print(f"opscope: the package carries {soname} ({path.resolve()})")
            # A RUNPATH is not inherited: the loader would look for what a carried library
            # needs in the system folders only, not beside it.
            beyond = libraries_to_carry(path)
            if beyond:
                raise RuntimeError(
                    f"{soname} needs {', '.join(n for n, _ in beyond)}, which the system may "
                    "lack and which the loader would not look for beside it")
            shutil.copyfile(path.resolve(), target.parent / soname)
        # The C API header, where opscope.get_include() looks for it.
        header = target.parent / "include" / "opscope" / "python_capi.h"
        header.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "include" / "opscope" / "python_capi.h", header)


setup(ext_modules=[Extension("opscope._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
