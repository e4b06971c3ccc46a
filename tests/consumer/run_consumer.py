#!/usr/bin/env python3
"""Installs opscope into a scratch prefix and uses it as a user would (ctest package_consumer_*).

    run_consumer.py --build-dir B --source tests/consumer --work W --style STYLE

STYLE is how the consumer program (tests/consumer/main.cpp) is built against the prefix:
  cmake      find_package(opscope) with opscope::opscope and opscope::memhook
  static     the same with opscope::opscope_static (built with OPSCOPE_BUILD_STATIC)
  pkgconfig  g++ -std=c++20 main.cpp $(pkg-config --cflags --libs opscope-memhook)
  plain      g++ -std=c++20 main.cpp -I$P/include -L$P/lib -lopscope_memhook -lopscope
  python     the Python package the install put under the prefix, imported from there
  pip        `OPSCOPE_CMAKE_BUILD_DIR=<build, relative> pip install --target DIR python/`, run
             from the build folder's parent: reuses that build, then imported from DIR

Each C++ style then runs the program twice: alone (ranges recorded, the allocator hook's
reports seen, a valid trace written), and with KINETO_USE_DAEMON=1 next to the installed
`opscope daemon`, traced by the installed `opscope trace --wait`: on-demand autostart must
work whatever the link style. Exits non-zero with what went wrong.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def fail(message):
    sys.exit(f"package_consumer: {message}")


def run(cmd, env=None, cwd=None, what=None):
    shown = " ".join(shlex.quote(str(c)) for c in cmd)
    print(f"$ {shown}", flush=True)
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    if proc.returncode != 0:
        fail(f"{what or shown} failed ({proc.returncode}):\n{proc.stdout}")
    return proc.stdout


def cache_value(build_dir, name):
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        m = re.match(rf"^{name}:[A-Z]+=(.*)$", line)
        if m:
            return m.group(1)
    return ""


def install(build_dir, prefix):
    run(["cmake", "--install", build_dir, "--prefix", prefix], what="cmake --install")
    # Nothing may land outside the prefix (the Python package included).
    manifest = build_dir / "install_manifest.txt"
    outside = [p for p in manifest.read_text().split() if not p.startswith(str(prefix) + "/")]
    if outside:
        fail(f"installed outside the prefix {prefix}: {outside}")


def build_consumer(style, build_dir, source, work, prefix):
    """Builds the consumer program; returns (path, environment to run it with)."""
    cxx = cache_value(build_dir, "CMAKE_CXX_COMPILER") or "c++"
    exe = work / "consumer"
    env = dict(os.environ)
    libdir = prefix / (cache_value(build_dir, "CMAKE_INSTALL_LIBDIR") or "lib")
    if style in ("cmake", "static"):
        generator = cache_value(build_dir, "CMAKE_GENERATOR")
        configure = ["cmake", "-S", source, "-B", work / "build", f"-DCMAKE_CXX_COMPILER={cxx}",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
                     "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
                     "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF"]
        if generator:
            configure += ["-G", generator]
        if style == "static":
            configure += ["-DCONSUMER_STATIC=ON"]
        run(configure, what="configuring the consumer")
        found = Path(cache_value(work / "build", "opscope_DIR")).resolve()
        if not str(found).startswith(str(prefix.resolve()) + "/"):
            fail(f"find_package(opscope) used {found}, not the scratch install in {prefix}")
        run(["cmake", "--build", work / "build", "--parallel", "2"], what="building the consumer")
        return work / "build" / "consumer", env
    if style == "pkgconfig":
        # Only the prefix's .pc files: PKG_CONFIG_LIBDIR replaces the system's search path.
        pc_env = dict(env, PKG_CONFIG_LIBDIR=str(libdir / "pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "opscope-memhook"], env=pc_env)
        run([cxx, "-std=c++20", "-O2", source / "main.cpp", *shlex.split(flags), "-o", exe],
            what="g++ with pkg-config's flags")
        return exe, env  # the .pc file's rpath finds the library
    if style == "plain":
        run([cxx, "-std=c++20", "-O2", source / "main.cpp", f"-I{prefix / 'include'}",
             f"-L{libdir}", "-lopscope_memhook", "-lopscope", "-o", exe], what="plain g++")
        env["LD_LIBRARY_PATH"] = str(libdir)  # a prefix outside the loader's search path
        return exe, env
    fail(f"unknown style {style}")


def check_program(exe, env, work, prefix, name):
    # 1. Alone: ranges, the hook's allocations and a trace; on-demand stays off.
    out = run([exe, work / "trace.json", "--memhook"], env=env, what="the consumer")
    print(out)
    if "ondemand enabled=0" not in out or "consumer: ok" not in out:
        fail(f"unexpected consumer output:\n{out}")
    json.loads((work / "trace.json").read_text())

    # 2. Traced on demand by the installed daemon and CLI, opted in by environment only.
    # The socket directory is directly under /tmp, not in the work folder: a build directory
    # deep enough leaves no room for the endpoint names in sockaddr_un's 108 bytes.
    sockets = Path(tempfile.mkdtemp(prefix="opscope-sock-", dir="/tmp"))
    endpoint = f"opscope-consumer-{name}-{os.getpid()}"
    daemon = subprocess.Popen([prefix / "bin" / "opscope", "daemon", "--port", "0",
                               "--ipc-name", endpoint, "--socket-dir", sockets],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    program = None
    try:
        line = daemon.stdout.readline()
        m = re.search(r"port (\d+)", line)
        if not m:
            fail(f"the installed daemon did not start: {line}{daemon.stdout.read()}")
        port = m.group(1)
        traced_env = dict(env, KINETO_USE_DAEMON="1", OPSCOPE_DAEMON_ENDPOINT=endpoint,
                          KINETO_IPC_SOCKET_DIR=str(sockets), OPSCOPE_DAEMON_POLL_MS="50",
                          OPSCOPE_ONDEMAND_TRACE_DIR=str(work))
        program = subprocess.Popen([exe, work / "trace2.json", "--memhook", "--steps", "400"],
                                   env=traced_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in program.stdout:
            seen.append(line)
            if line.startswith("stepping"):
                break
        if "ondemand enabled=1\n" not in seen:
            fail("KINETO_USE_DAEMON=1 did not start on-demand tracing:\n" + "".join(seen))
        log_file = work / "ondemand.json"
        out = run([prefix / "bin" / "opscope", "trace", "--pid", program.pid, "--duration-ms",
                   "300", "--log-file", log_file, "--port", port, "--wait", "--timeout-s", "60"],
                  what="the installed opscope trace")
        trace_path = work / f"ondemand_{program.pid}.json"
        if str(trace_path) not in out:
            fail(f"opscope trace did not print {trace_path}:\n{out}")
        names = {e.get("name") for e in json.loads(trace_path.read_text())["traceEvents"]}
        if "consumer::step" not in names:
            fail(f"the on-demand trace has no consumer::step range: {sorted(map(str, names))[:20]}")
        print(f"on-demand trace ok: {trace_path}")
    finally:
        for p in (program, daemon):
            if p is not None:
                p.kill()
                p.wait()
        shutil.rmtree(sockets, ignore_errors=True)


def check_python(prefix, work):
    found = list(prefix.glob("lib/python3*/*-packages/opscope/_C*.so"))
    if len(found) != 1:
        fail(f"the Python package is not under {prefix}/lib/python3.X: {found}")
    check_python_import(found[0].parent.parent, work)


def check_python_import(site, work):
    # libopscope.so must come from what was installed (a RUNPATH left pointing into the build
    # folder would find the build's copy, and the package would fail on another machine).
    script = (
        "import opscope, opscope.profiler as p\n"
        "with p.profile() as prof:\n"
        "    with p.record_function('consumer::python'): pass\n"
        "names = [e.name for e in prof.events()]\n"
        "assert 'consumer::python' in names, names\n"
        "maps = {l.split()[-1] for l in open('/proc/self/maps') if 'libopscope.so' in l}\n"
        f"assert maps and all(m.startswith({str(work)!r} + '/') for m in maps), maps\n"
        "print('python ok', opscope.__file__)\n")
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    out = run([sys.executable, "-c", script], env=env, cwd=work, what="importing the package")
    if str(site) not in out:
        fail(f"imported another opscope than the installed one:\n{out}")
    print(out)


def check_pip(build_dir, source_root, work):
    # A copy of python/, so that pip's in-tree build leaves the checkout clean.
    package = work / "python"
    shutil.copytree(source_root / "python", package,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = work / "site"
    cwd = build_dir.parent
    # As a shell would run it: PWD is the directory pip runs in.
    env = dict(os.environ, OPSCOPE_CMAKE_BUILD_DIR=build_dir.name, PWD=str(cwd))
    run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", site, package], env=env, cwd=cwd, what="pip install")
    built = list((package / "build").glob("**/cmake/CMakeCache.txt"))
    if built:
        fail(f"pip configured a fresh build in {built[0].parent} instead of reusing {build_dir}")
    if not list((site / "opscope").glob("libopscope.so.*")):
        fail(f"the package pip installed has no libopscope.so beside _C: {sorted(site.rglob('*'))}")
    check_python_import(site, work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, required=True)
    ap.add_argument("--source", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--style", required=True, choices=["cmake", "static", "pkgconfig", "plain", "python", "pip"])
    args = ap.parse_args()
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.style == "pip":
        check_pip(args.build_dir.resolve(), args.source.resolve().parent.parent, work)
        return
    prefix = work / "prefix"
    install(args.build_dir.resolve(), prefix)
    if args.style == "python":
        check_python(prefix, work)
        return
    exe, env = build_consumer(args.style, args.build_dir.resolve(), args.source.resolve(), work,
                              prefix)
    check_program(exe, env, work, prefix, args.style)


if __name__ == "__main__":
    main()
