#!/usr/bin/python3
"""The CPU time of `opscope analyze` from two builds, run alternately on the same traces.

A before-and-after figure for a change to the reader or the reports, taken under one load: the
two builds take turns (the order swapped every round, so neither always runs on a warm cache),
and each run's user + system CPU time comes from wait4(), which the other sessions sharing the
machine move less than wall time.

  bench/alternate_analyze.py --before /tmp/main-build --after build TRACE [TRACE...] \\
      --report temporal --runs 15

BUILD is a build folder (its tools/opscope and the libopscope.so beside it, in lib/ or src/).
Prints, per trace, each build's median and minimum CPU time and wall time, and after/before.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def command(build: Path):
    exe = build / "tools" / "opscope"
    if not exe.is_file():
        sys.exit(f"alternate_analyze.py: no {exe} (give a build folder holding tools/opscope)")
    env = dict(os.environ)
    libs = [str(d) for d in (build / "lib", build / "src") if d.is_dir()]
    env["LD_LIBRARY_PATH"] = ":".join(libs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    return [str(exe)], env


def run_once(cmd, env, args):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"alternate_analyze.py: {' '.join(cmd + args)} failed: {p.stderr.read().decode()}")
    return usage.ru_utime + usage.ru_stime, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--before", type=Path, required=True, help="the build folder before the change")
    ap.add_argument("--after", type=Path, default=Path("build"), help="the build folder after it")
    ap.add_argument("--report", default="temporal", help="--report of opscope analyze")
    ap.add_argument("--threads", default="1", help="--threads of opscope analyze (default 1)")
    ap.add_argument("--runs", type=int, default=9, help="runs of each build per trace")
    a = ap.parse_args()
    builds = {"before": command(a.before), "after": command(a.after)}
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()[0]:.2f}")
    for trace in a.traces:
        args = ["analyze", str(trace), "--report", a.report, "--threads", a.threads]
        cpu = {"before": [], "after": []}
        wall = {"before": [], "after": []}
        for i in range(a.runs):
            for which in ("before", "after") if i % 2 == 0 else ("after", "before"):
                c, w = run_once(*builds[which], args)
                cpu[which].append(c)
                wall[which].append(w)
        print(f"{trace.name} --report {a.report}, {a.runs} runs each:")
        for which in ("before", "after"):
            print(f"  {which}: CPU median {statistics.median(cpu[which]) * 1e3:.1f} ms "
                  f"(min {min(cpu[which]) * 1e3:.1f}), wall median "
                  f"{statistics.median(wall[which]) * 1e3:.1f} ms")
        ratio = statistics.median(cpu["after"]) / statistics.median(cpu["before"])
        print(f"  after / before (CPU medians): {ratio:.3f}")
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
