#!/usr/bin/env python3
"""Builds opscope's wheel and uses it from a fresh venv, as a user would (ctest python_wheel).

    python3 python/tests/wheel_check.py [--build-dir B] [--work W] [--frontend pip|build] [--keep]

The interpreter running this script is the one the wheel is built for and installed into: on
Debian 12 /usr/bin/python3 (3.11), in the Debian 13 root its python3 (3.13), e.g.

    scripts/debian-root trixie -- python3 python/tests/wheel_check.py --build-dir build-trixie

1. `pip wheel --no-build-isolation --no-deps --no-index` (or, with --frontend build,
   `python3 -m build --wheel --no-isolation`) on a copy of python/ (so the checkout stays
   clean). With --build-dir, setup.py reuses that configured build (OPSCOPE_CMAKE_BUILD_DIR);
   without it, it configures and builds a fresh one from a copy of the repository, as
   `pip wheel ./python` in a clone does.
2. The wheel: exactly one, tagged for this interpreter and linux_<arch>; it holds _C and
   libopscope.so, both with RUNPATH $ORIGIN, and every library libopscope.so needs beyond the
   system's (python/setup.py SYSTEM_LIBRARIES).
3. A fresh `python3 -m venv --system-site-packages` (the system's site-packages only for
   pandas and numpy, which come from Debian: there is no PyPI here) outside the source tree, the
   wheel installed by the venv's pip, then, from a folder outside the source tree and without
   PYTHONPATH: a profile, its Chrome trace (.json.gz), and opscope.analysis on that trace. The
   program checks that opscope was imported from the venv and that _C, libopscope.so and the
   carried libraries were mapped from the venv's opscope folder, not from the build or the
   system.

W (default: a new folder under the system's temporary folder) must be outside the source tree;
it is removed at the end unless --keep is given or a check failed. Exits non-zero with what
went wrong.
"""

import argparse
import importlib.util
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

# Kept in step with python/setup.py: the libraries the wheel leaves to the system.
SYSTEM_LIBRARIES = (
    "linux-vdso.so.", "ld-linux", "libc.so.", "libm.so.", "libdl.so.", "libpthread.so.",
    "librt.so.", "libutil.so.", "libresolv.so.", "libstdc++.so.", "libgcc_s.so.", "libz.so.",
)

# Run by the venv's interpreter, in a folder outside the source tree.
USER_PROGRAM = r"""
import gzip, json, os, sys

import opscope
import opscope.profiler as p

site = os.path.dirname(os.path.abspath(opscope.__file__))
if not site.startswith(sys.prefix + os.sep):
    sys.exit(f"opscope was imported from {site}, not from the venv {sys.prefix}")

def work(n):
    return sum(i * i for i in range(n))

steps = 5
with p.profile(activities=[p.ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
    for _ in range(steps):
        with p.record_function("wheel::step"):
            work(20000)
os.makedirs("traces")
prof.export_chrome_trace("traces/wheel.json.gz")
with gzip.open("traces/wheel.json.gz", "rt") as f:
    events = json.load(f)["traceEvents"]
ranges = [e for e in events if e.get("name") == "wheel::step" and e.get("ph") == "X"]
if len(ranges) != steps:
    sys.exit(f"the Chrome trace has {len(ranges)} wheel::step ranges, expected {steps}")

from opscope.analysis import TraceAnalysis

ops = TraceAnalysis(trace_dir="traces").get_operator_table()
row = ops[ops["Name"] == "wheel::step"]
if len(row) != 1 or int(row["# of Calls"].iloc[0]) != steps:
    sys.exit(f"opscope.analysis's operator table has no wheel::step row with {steps} calls:\n{ops}")

# Every binary of the package, and only its copy, is in the process.
mapped = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("/"):
            mapped.add(fields[5])
carried = sorted(n for n in os.listdir(site) if ".so" in n)
for name in carried:
    # Another copy of a library would be mapped under its file name (libfmt.so.9.1.0).
    stem = name if name.startswith("_C") else name.split(".so")[0] + ".so"
    where = sorted(m for m in mapped if os.path.basename(m).startswith(stem))
    if where != [os.path.join(site, name)]:
        sys.exit(f"{name} is mapped from {where}, expected only {os.path.join(site, name)}")
print("wheel program ok:", opscope.__file__, "carried:", " ".join(carried),
      f"trace events: {len(events)}")
"""


def fail(message):
    sys.exit(f"wheel_check: {message}")


def run(cmd, what, env=None, cwd=None):
    print("$ " + " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=3000)
    if done.returncode != 0:
        fail(f"{what} failed ({done.returncode}):\n{done.stdout}")
    return done.stdout


def inside(path, folder):
    return path == folder or folder in path.parents


def dynamic_section(path):
    """(NEEDED sonames, RUNPATH) of an ELF file, as readelf prints them."""
    out = run(["readelf", "-d", path], f"readelf -d {path}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", out)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    return needed, runpath[0] if runpath else None


def build_wheel(build_dir, work, frontend):
    env = dict(os.environ, PWD=str(work))
    for name in ("PYTHONPATH", "OPSCOPE_CMAKE_BUILD_DIR", "OPSCOPE_CMAKE_ARGS"):
        env.pop(name, None)
    ignore = shutil.ignore_patterns("build", "build-*", ".git", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "venv", ".venv")
    if build_dir is not None:
        package = work / "python"
        shutil.copytree(REPOSITORY / "python", package, ignore=ignore)
        env["OPSCOPE_CMAKE_BUILD_DIR"] = str(build_dir)
    else:
        shutil.copytree(REPOSITORY, work / "source", ignore=ignore)
        package = work / "source" / "python"
        if shutil.which("ccache"):
            env["OPSCOPE_CMAKE_ARGS"] = "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    dist = work / "dist"
    if frontend == "build":
        run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
             "--outdir", dist, package], "python3 -m build", env=env, cwd=work)
    else:
        run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
             "--no-index", "--wheel-dir", dist, package], "pip wheel", env=env, cwd=work)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        fail(f"pip wheel left {len(wheels)} wheels in {dist}, expected one: {wheels}")
    return wheels[0]


def check_wheel(wheel, work):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    expected = f"opscope-.+-{tag}-{tag}-{plat}.whl"
    if not re.fullmatch(expected, wheel.name):
        fail(f"the wheel is named {wheel.name}, expected {expected}")
    unpacked = work / "unpacked"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(unpacked)
    package = unpacked / "opscope"
    version = f"{sys.version_info.major}{sys.version_info.minor}"
    modules = sorted(package.glob(f"_C.cpython-{version}*.so"))
    libraries = sorted(package.glob("libopscope.so.*"))
    if len(modules) != 1 or len(libraries) != 1:
        fail(f"the wheel's opscope/ has _C {modules} and libopscope.so {libraries}, "
             "one each wanted")
    for binary in (modules[0], libraries[0]):
        _, runpath = dynamic_section(binary)
        if runpath != "$ORIGIN":
            fail(f"{binary.name} in the wheel has RUNPATH {runpath!r}, expected '$ORIGIN'")
    needed, _ = dynamic_section(libraries[0])
    missing = [n for n in needed
               if not n.startswith(SYSTEM_LIBRARIES) and not (package / n).exists()]
    if missing:
        fail(f"libopscope.so needs {missing}, which the wheel does not carry")
    carried = sorted(p.name for p in package.glob("lib*.so.*"))
    print(f"wheel ok: {wheel.name} ({wheel.stat().st_size} bytes), opscope/ carries {carried}")


def check_venv(wheel, work):
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], "python3 -m venv")
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "OPSCOPE_"))}
    env["PYTHONNOUSERSITE"] = "1"
    run([python, "-m", "pip", "install", "--no-index", "--no-deps", wheel],
        "pip install of the wheel into the venv", env=env)
    here = work / "user"
    here.mkdir()
    (here / "use_opscope.py").write_text(USER_PROGRAM)
    print(run([python, "use_opscope.py"], "the program using the installed wheel", env=env,
              cwd=here))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path,
                    help="a configured opscope build to reuse (default: a fresh one)")
    ap.add_argument("--work", type=Path, help="an empty or absent folder outside the source tree")
    ap.add_argument("--frontend", choices=["pip", "build"], default="pip",
                    help="pip wheel (default), or python3 -m build --wheel (Debian: python3-build)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    if args.frontend == "build" and importlib.util.find_spec("build") is None:
        fail(f"--frontend build: {sys.executable} has no module build (Debian: python3-build)")
    build_dir = args.build_dir.resolve() if args.build_dir else None
    if build_dir is not None and not (build_dir / "CMakeCache.txt").exists():
        fail(f"--build-dir {build_dir} is not a configured CMake build (no CMakeCache.txt)")
    if args.work is None:
        work = Path(tempfile.mkdtemp(prefix="opscope-wheel-")).resolve()
    else:
        work = args.work.resolve()
        if work.exists() and any(work.iterdir()):
            fail(f"--work {work} is not empty")
        work.mkdir(parents=True, exist_ok=True)
    if inside(work, REPOSITORY) or (build_dir is not None and inside(work, build_dir)):
        fail(f"--work {work} is inside the source tree {REPOSITORY} or the build {build_dir}: "
             "its opscope could then be imported instead of the installed one")
    print(f"wheel_check: Python {platform.python_version()} ({sys.executable}), work folder {work}")
    wheel = build_wheel(build_dir, work, args.frontend)
    check_wheel(wheel, work)
    check_venv(wheel, work)
    if not args.keep:
        shutil.rmtree(work)
    print("wheel_check: ok")


if __name__ == "__main__":
    main()
