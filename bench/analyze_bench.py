#!/usr/bin/env python3
"""`opscope analyze` against Holistic Trace Analysis and against the physical floor, in one run.

    /usr/bin/python3 bench/analyze_bench.py [--build build] [--runs 18] [--hta-runs 5]
                                            [--big-gb 2] [--keep DIR] [--baseline BUILD]

Issue 19's targets, each measured here side by side:
  1. a .json.gz trace: load + report in at most 2 x the time `zcat` takes to inflate it;
  2. the same trace uncompressed: at least 100 x faster than HTA; beside it the floor of any
     reader of that file with simdjson, bench/trace_walk_floor (every field walked, nothing
     kept, one core);
  3. at least 300 MB/s of uncompressed JSON per core, end to end, and ranks read in parallel;
  4. peak memory below the uncompressed size of the trace, for a generated trace of
     --big-gb GB (0 skips it: writing it takes a minute and the disk space).

The trace is the largest real one in ../shared/peers (nccl_parser_config: an A100 job with
NCCL all-reduces, 9.8 MB of JSON). Larger traces are made from it by
tests/peers/longer_trace.py (which makes the goldens' traces too): its events repeated, each
copy shifted in time past the previous one with its own ids and steps, so the result is a
longer run of the same job. Every time is a whole process (what a user waits
for: start, read, report, exit), the median of --runs; HTA's also split into its import and
its own load + report (measured inside its process). opscope's runs against HTA are
interleaved with HTA's (before, between and after them), so that both see the same load.
With --baseline (the build folder of an earlier commit, e.g. of a clean clone), that build's
`opscope analyze` of the .json is timed too, its runs alternated with this build's, so that a
change is measured before and after under the same load: minutes apart, the same binary here
differs by 10 % or more, and HTA with it.
Prints a table and writes it as JSON to build/bench-results/analyze-<date-time>.json.
"""
import argparse
import atexit
import datetime
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("OPSCOPE_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
TRACE = os.path.join(SHARED, "peers/kineto-traces/nccl_parser_config/nccl_data.json.gz")
HTA = os.path.join(SHARED, "peers/hta")
sys.path.insert(0, os.path.join(ROOT, "tests", "peers"))
from longer_trace import repeated_events, write_trace  # noqa: E402  (the goldens' generator too)

HTA_PROGRAM = """
import logging, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[2]).get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def timed(cmd, runs, peak=True, median=True):
    """Median seconds of `runs` runs of cmd (every run's, without `median`), each run's
    standard output, and the peak resident memory (bytes) of one more run under GNU time (0
    without `peak`): the rusage of a child forked from this (large) Python process would count
    the pages it shared before exec."""
    times, outs = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): "
                             f"{proc.stderr.decode()[-2000:]}")
        outs.append(proc.stdout.decode())
    kib = 0
    if peak:
        with tempfile.NamedTemporaryFile("r") as f:
            subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f.name] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            kib = int(f.read().split()[-1])
    return (statistics.median(times) if median else times), kib * 1024, outs


def timed_beside(cmd, runs, hta_cmd, hta_runs):
    """timed() of cmd and of hta_cmd, their runs interleaved: cmd's runs spread over the
    seconds HTA's take, before, between and after them, so that both medians are taken under
    the same load (on this shared 2-core machine a second core can be taken away for seconds,
    which a burst of 10-ms runs would catch whole). Returns (median, peak, outs) of each."""
    rounds = max(1, hta_runs)
    per_round = max(1, -(-runs // (rounds + 1)))  # ceil(runs / (rounds + 1))
    times, hta_times, hta_outs = [], [], []
    for r in range(rounds + 1):
        t, _, _ = timed(cmd, per_round, peak=False, median=False)
        times += t
        if r < rounds:
            t, _, outs = timed(hta_cmd, 1, peak=False, median=False)
            hta_times += t
            hta_outs += outs
    _, peak, outs = timed(cmd, 1)
    return ((statistics.median(times), peak, outs),
            (statistics.median(hta_times), 0, hta_outs))


def mb(n):
    return n / 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=18)
    p.add_argument("--hta-runs", type=int, default=5)
    p.add_argument("--big-gb", type=float, default=2.0)
    p.add_argument("--keep", help="keep the generated traces in this directory")
    p.add_argument("--baseline", help="an earlier build folder to time against this one")
    a = p.parse_args()
    opscope = os.path.join(a.build, "tools/opscope")
    baseline = os.path.join(a.baseline, "tools/opscope") if a.baseline else None
    floor = os.path.join(a.build, "bench/trace_walk_floor")
    for path, what in ((opscope, "the opscope binary (build it first)"),
                       (floor, "bench/trace_walk_floor (build it first)"), (TRACE, "the trace"),
                       (HTA, "Holistic Trace Analysis"),
                       (baseline or TRACE, "opscope binary in the --baseline build")):
        if not os.path.exists(path):
            raise SystemExit(f"no {what} at {path}")
    work = a.keep or tempfile.mkdtemp(prefix="opscope_analyze_bench_")
    os.makedirs(work, exist_ok=True)
    if not a.keep:  # the generated traces take hundreds of MB
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])  # noqa: E731
    started = datetime.datetime.utcnow()
    print(f"run of {started:%Y-%m-%d %H:%M} UTC, load average {load()}, {os.cpu_count()} cores")

    # The real trace, gzip and plain, each alone in a directory (HTA reads directories).
    with gzip.open(TRACE, "rb") as f:
        text = f.read()
    doc = json.loads(text)
    gz_dir, json_dir = os.path.join(work, "gz"), os.path.join(work, "json")
    for d in (gz_dir, json_dir):
        os.makedirs(d, exist_ok=True)
    gz_file = os.path.join(gz_dir, "rank0.json.gz")
    json_file = os.path.join(json_dir, "rank0.json")
    with open(gz_file, "wb") as f, open(TRACE, "rb") as src:
        f.write(src.read())
    with open(json_file, "wb") as f:
        f.write(text)
    json_bytes = len(text)
    results = {"date": f"{started:%Y-%m-%d %H:%M} UTC", "load_start": load(),
               "trace": os.path.relpath(TRACE, SHARED), "json_bytes": json_bytes,
               "gz_bytes": os.path.getsize(gz_file)}

    analyze = [opscope, "analyze", "--report", "temporal"]
    t_zcat, _, _ = timed(["zcat", gz_file], a.runs)
    hta = [sys.executable, "-c", HTA_PROGRAM, HTA]
    (t_gz, _, _), (hta_gz, _, out_gz) = timed_beside(analyze + [gz_file], a.runs,
                                                     hta + [gz_dir], a.hta_runs)
    (t_json, peak_json, _), (hta_json, _, out_json) = timed_beside(
        analyze + [json_file], a.runs, hta + [json_dir], a.hta_runs)
    # The same on one thread (--threads 1): what the second core's parsing gives.
    t_json1, _, _ = timed(analyze + ["--threads", "1", json_file], a.runs)
    # The floor under both: a bare simdjson walk of every field, nothing kept, one core.
    t_floor, _, _ = timed([floor, json_file], a.runs)
    inner = lambda outs: statistics.median(float(o.split()[1]) for o in outs)  # noqa: E731
    if baseline:
        mine, theirs = [], []
        for _ in range(2 * a.runs):
            mine += timed(analyze + [json_file], 1, peak=False, median=False)[0]
            theirs += timed([baseline] + analyze[1:] + [json_file], 1, peak=False,
                            median=False)[0]
        results.update(baseline=os.path.abspath(a.baseline),
                       baseline_json_s=statistics.median(theirs),
                       against_baseline_json_s=statistics.median(mine))
    results.update(zcat_s=t_zcat, opscope_gz_s=t_gz, opscope_json_s=t_json,
                   opscope_json_one_thread_s=t_json1, walk_floor_s=t_floor, hta_gz_s=hta_gz,
                   hta_json_s=hta_json, hta_gz_inner_s=inner(out_gz),
                   hta_json_inner_s=inner(out_json))

    # Throughput per core on a larger trace (the fixed cost of a process start amortized):
    # one rank on one thread (--threads 1), the same rank with the second core parsing too
    # (the default), and then two ranks at once (a core each).
    copies = 10
    big_dir = os.path.join(work, "big")
    os.makedirs(big_dir, exist_ok=True)
    big = os.path.join(big_dir, "rank0.json")
    big_bytes = write_trace(big, doc, repeated_events(doc["traceEvents"], copies))
    t_big, peak_big, _ = timed(analyze + ["--threads", "1", big], a.runs)
    t_big2, _, _ = timed(analyze + [big], a.runs)
    two_dir = os.path.join(work, "two")
    os.makedirs(two_dir, exist_ok=True)
    rank0, rank1 = os.path.join(two_dir, "rank0.json"), os.path.join(two_dir, "rank1.json")
    if not os.path.exists(rank0):
        os.link(big, rank0)
    doc1 = dict(doc, distributedInfo=dict(doc.get("distributedInfo", {}), rank=1))
    write_trace(rank1, doc1, repeated_events(doc["traceEvents"], copies))
    t_two, _, _ = timed(analyze + [two_dir], a.runs)
    results.update(big_json_bytes=big_bytes, opscope_big_s=t_big, opscope_big_peak=peak_big,
                   opscope_big_two_threads_s=t_big2, opscope_two_ranks_s=t_two)

    # Peak memory on a trace of --big-gb GB.
    if a.big_gb > 0:
        huge = os.path.join(work, "huge.json")
        n = max(1, int(a.big_gb * 1e9 / json_bytes))
        huge_bytes = write_trace(huge, doc, repeated_events(doc["traceEvents"], n))
        t_huge, peak_huge, _ = timed(analyze + [huge], 1)  # (and once more for the peak)
        results.update(huge_json_bytes=huge_bytes, opscope_huge_s=t_huge,
                       opscope_huge_peak=peak_huge)
        if not a.keep:
            os.remove(huge)
    results["load_end"] = load()

    rows = [
        ("trace", f"{results['trace']}: {mb(json_bytes):.1f} MB JSON, "
                  f"{mb(results['gz_bytes']):.2f} MB gzip"),
        ("zcat (inflate only)", f"{t_zcat * 1e3:.1f} ms"),
        ("opscope analyze, .json.gz", f"{t_gz * 1e3:.1f} ms = {t_gz / t_zcat:.2f} x zcat "
                                      "(target <= 2)"),
        ("HTA, .json.gz", f"{hta_gz * 1e3:.0f} ms (its load + report alone "
                          f"{results['hta_gz_inner_s'] * 1e3:.0f} ms) = "
                          f"{hta_gz / t_gz:.0f} x opscope"),
        ("opscope analyze, .json", f"{t_json * 1e3:.1f} ms, peak {mb(peak_json):.0f} MB "
                                   f"(--threads 1: {t_json1 * 1e3:.1f} ms)"),
        ("HTA, .json", f"{hta_json * 1e3:.0f} ms (its load + report alone "
                       f"{results['hta_json_inner_s'] * 1e3:.0f} ms) = "
                       f"{hta_json / t_json:.0f} x opscope (target >= 100)"),
        ("floor, .json", f"{t_floor * 1e3:.1f} ms = HTA / {hta_json / t_floor:.0f}: "
                         "bench/trace_walk_floor, a bare simdjson walk of every field on one "
                         "core, nothing kept"),
        ("one rank, larger", f"{mb(big_bytes):.0f} MB in {t_big * 1e3:.0f} ms on one thread "
                             f"(--threads 1) = {mb(big_bytes) / t_big:.0f} MB/s on one core "
                             f"(target >= 300), peak {mb(peak_big):.0f} MB; two threads "
                             f"{t_big2 * 1e3:.0f} ms = {mb(big_bytes) / t_big2:.0f} MB/s"),
        ("two such ranks", f"{t_two * 1e3:.0f} ms = {t_two / t_big:.2f} x one rank on one "
                           f"thread ({os.cpu_count()} cores)"),
    ]
    if baseline:
        t_mine, t_theirs = results["against_baseline_json_s"], results["baseline_json_s"]
        rows.append(("against --baseline, .json",
                     f"{t_mine * 1e3:.2f} ms, the baseline's {t_theirs * 1e3:.2f} ms = "
                     f"{t_mine / t_theirs:.3f} x ({2 * a.runs} runs each, alternated)"))
    if a.big_gb > 0:
        rows.append(("generated trace", f"{mb(results['huge_json_bytes']):.0f} MB in "
                     f"{results['opscope_huge_s']:.1f} s, peak "
                     f"{mb(results['opscope_huge_peak']):.0f} MB = "
                     f"{results['opscope_huge_peak'] / results['huge_json_bytes']:.2f} x its "
                     "size (target < 1)"))
    rows.append(("load average", f"{results['load_start']} at the start, "
                                 f"{results['load_end']} at the end"))
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out_dir = os.path.join(a.build, "bench-results")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"analyze-{started:%Y%m%d-%H%M%S}.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"(raw figures: {out})")


if __name__ == "__main__":
    main()
