#!/usr/bin/python3
"""Peak memory and time of `opscope analyze` (and merge) on adversarial traces (issue 40).

Generates each hostile shape at a configurable scale into a temporary directory, runs the
command under /usr/bin/time (its peak RSS, %M) RUNS times, alternating the binaries given, and
prints the medians as a Markdown table with the input's size and the bound each is judged
against (README.md, "Reading traces you did not write").

    bench/hostile_memory.py --opscope build/tools/opscope [--before /tmp/before/tools/opscope]
                            [--scale 1.0] [--runs 3] [--only NAME,...]

The default scale runs in a few minutes on two cores. --scale 10 makes the shapes of the issue
(3 M kernel names, a 500 MB args object) and needs the memory they take.
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zlib

MIB = 1 << 20


def kernel(name, i, tid=7, pid=0, extra=""):
    return ('{"ph":"X","cat":"kernel","name":"%s","pid":%d,"tid":%d,"ts":%d,"dur":5,'
            '"args":{"device":0,"stream":%d,"correlation":%d%s}}'
            % (name, pid, tid, 1000 + i * 10, tid, i, extra))


def write_trace(path, events, top=""):
    with open(path, "w") as f:
        f.write('{"traceEvents":[\n')
        first = True
        for e in events:
            if not first:
                f.write(",\n")
            f.write(e)
            first = False
        f.write('\n],"distributedInfo":{"rank":0}%s}' % top)


# --- the shapes: each writes its input and returns (path, the arguments after `opscope`) -----

def shape_kernel_names(d, n):
    """n kernels, each with a name of its own."""
    p = os.path.join(d, "names.json")
    write_trace(p, (kernel("kernel_%09d_%s" % (i, "x" * 60), i) for i in range(n)))
    return p


def shape_big_args(d, n):
    """one event whose args object holds n bytes (many small keys)."""
    p = os.path.join(d, "big_args.json")
    with open(p, "w") as f:
        f.write('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,'
                '"ts":1000,"dur":10,"args":{')
        item = '"k%08d":[1,2,3,4,5,6,7,8],'
        per = len(item % 0)
        for i in range(max(1, n // per)):
            f.write(item % i)
        f.write('"end":0}}],"distributedInfo":{"rank":0}}')
    return p


def flow_pair(i, cat, fid):
    ts = 1000 + i * 10
    return ('{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":%d,"dur":4},\n'
            '{"ph":"s","cat":"%s","name":"f","id":%d,"pid":1,"tid":1,"ts":%d},\n'
            '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":4,'
            '"args":{"device":0,"stream":7}},\n'
            '{"ph":"f","cat":"%s","name":"f","id":%d,"pid":0,"tid":7,"ts":%d,"bp":"e"}'
            % (ts, cat, fid, ts + 1, ts + 5, cat, fid, ts + 6))


def shape_flow_categories(d, n):
    """n flow pairs, each with a category of its own (the quadratic join of issue 40)."""
    p = os.path.join(d, "flow_categories.json")
    write_trace(p, (flow_pair(i, "cat_%07d" % i, i) for i in range(n)))
    return p


def shape_flows_one_id(d, n):
    """n flow pairs that all share id 1 and category ac2g."""
    p = os.path.join(d, "flows_one_id.json")
    write_trace(p, (flow_pair(i, "ac2g", 1) for i in range(n)))
    return p


def shape_threads(d, n):
    """n CPU ops, each on a thread of its own."""
    p = os.path.join(d, "threads.json")
    write_trace(p, ('{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":%d,"ts":%d,"dur":4}'
                    % (i + 2, 1000 + i * 10) for i in range(n)))
    return p


def shape_pids(d, n):
    """n CPU ops, each in a process of its own."""
    p = os.path.join(d, "pids.json")
    write_trace(p, ('{"ph":"X","cat":"cpu_op","name":"op","pid":%d,"tid":1,"ts":%d,"dur":4}'
                    % (i + 2, 1000 + i * 10) for i in range(n)))
    return p


def shape_ranks(d, n):
    """a directory of 200 ranks of n/200 kernels each."""
    p = os.path.join(d, "ranks")
    os.makedirs(p, exist_ok=True)
    per = max(1, n // 200)
    for r in range(200):
        with open(os.path.join(p, "rank-%03d.json" % r), "w") as f:
            f.write('{"traceEvents":[\n')
            f.write(",\n".join(kernel("k%d" % (i % 50), i) for i in range(per)))
            f.write('\n],"distributedInfo":{"rank":%d}}' % r)
    return p


def shape_gzip_bomb(d, n):
    """a gzip trace whose events array holds n bytes of spaces (1 MB of gzip per GiB)."""
    p = os.path.join(d, "bomb.json.gz")
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(p, "wb") as f:
        f.write(c.compress(b'{"traceEvents":[' + kernel("k", 0).encode() + b","))
        block = b" " * MIB
        for _ in range(max(1, n // MIB)):
            f.write(c.compress(block))
        f.write(c.compress(kernel("k", 1).encode() + b"]}"))
        f.write(c.flush())
    return p


def shape_gzip_trailer_lie(d, n):
    """a real-looking .json.gz cut to 2,192 bytes whose last word claims 4.26 GB."""
    p = os.path.join(d, "lie.json.gz")
    text = ('{"traceEvents":[%s]}' % ",".join(kernel("k%d" % i, i) for i in range(2000)))
    data = gzip.compress(text.encode())[:2192]
    with open(p, "wb") as f:
        f.write(data[:-4] + (0xFE000000).to_bytes(4, "little"))
    return p


# name: (make(dir, n), n at scale 1, extra args, the bound in words)
SHAPES = {
    "kernel_names": (shape_kernel_names, 300_000, ["--report", "temporal"], "<= 8 x input + 64 MiB"),
    "kernel_names_7": (shape_kernel_names, 300_000,
                       ["--report", "temporal,idle,kernels,kernel-dist,overlap,launch,queue"],
                       "<= 16 x input + 64 MiB"),
    "big_args_50MB": (shape_big_args, 50 * MIB, ["--report", "temporal"], "<= 6 x input + 64 MiB"),
    "big_args_refused": (shape_big_args, 100 * MIB, ["--report", "temporal"],
                         "refused (--max-event-size, 64 MiB)"),
    "flow_categories": (shape_flow_categories, 100_000, ["--report", "temporal", "--augment", "{out}"],
                        "linear time"),
    "flows_one_id": (shape_flows_one_id, 300_000, ["--report", "temporal", "--augment", "{out}"],
                     "<= 8 x input + 64 MiB"),
    "threads": (shape_threads, 300_000, ["--report", "temporal"], "<= 8 x input + 64 MiB"),
    "pids": (shape_pids, 300_000, ["--report", "temporal"], "<= 8 x input + 64 MiB"),
    "ranks_200": (shape_ranks, 400_000, ["--report", "temporal"], "<= 8 x input + 64 MiB"),
    "gzip_bomb": (shape_gzip_bomb, 1024 * MIB, ["--report", "temporal"],
                  "refused at 100 x file (--max-gzip-ratio)"),
    "gzip_trailer_lie": (shape_gzip_trailer_lie, 1, ["--report", "temporal"],
                         "refused, exit 1 under ulimit -v 1000000"),
}


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))
    return os.path.getsize(path)


def run_once(binary, args, limit_kb=None):
    """(peak RSS in KiB, seconds, exit code, last line of stderr) of one run."""
    cmd = ["/usr/bin/time", "-f", "TIME %M %e", binary] + args
    pre = None
    if limit_kb is not None:
        import resource

        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (limit_kb * 1024, limit_kb * 1024))
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       preexec_fn=pre)
    lines = p.stderr.strip().splitlines()
    timing = [l for l in lines if l.startswith("TIME ")]
    rss, secs = (int(timing[-1].split()[1]), float(timing[-1].split()[2])) if timing else (0, 0.0)
    other = [l for l in lines if not l.startswith("TIME ") and not l.startswith("Command ")]
    # /usr/bin/time says how the command ended; its own exit code is the command's.
    return rss, secs, p.returncode, (other[-1] if other else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opscope", default="build/tools/opscope")
    ap.add_argument("--before", help="a second binary, run alternately (e.g. main's)")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", help="write the inputs here and keep them")
    a = ap.parse_args()
    binaries = [("after", a.opscope)] + ([("before", a.before)] if a.before else [])
    only = [s for s in a.only.split(",") if s]
    d = a.keep or tempfile.mkdtemp(prefix="opscope-hostile-")
    os.makedirs(d, exist_ok=True)
    print("load average: %.2f %.2f %.2f" % os.getloadavg(), file=sys.stderr)
    print("| shape | input | binary | peak RSS (MiB, median) | x input | time (s, median) | exit | bound |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for name, (make, n, args, bound) in SHAPES.items():
            if only and name not in only:
                continue
            path = make(d, max(1, int(n * a.scale)) if name != "gzip_trailer_lie" else 1)
            size = size_of(path)
            results = {label: [] for label, _ in binaries}
            for _ in range(a.runs):
                for label, binary in binaries:  # alternated, so that load falls on both alike
                    out = os.path.join(d, "out_" + label + ".json")
                    argv = ["analyze", path] + [x.replace("{out}", out) for x in args]
                    limit = 1_000_000 if name == "gzip_trailer_lie" else None
                    results[label].append(run_once(binary, argv, limit))
            for label, _ in binaries:
                r = results[label]
                rss = statistics.median(x[0] for x in r) / 1024
                secs = statistics.median(x[1] for x in r)
                codes = sorted({x[2] for x in r})
                print("| %s | %.1f MiB | %s | %.0f | %.1f | %.2f | %s | %s |"
                      % (name, size / MIB, label, rss, rss * MIB / max(size, 1), secs,
                         ",".join(map(str, codes)), bound))
                if any(x[2] != 0 for x in r):
                    print("    %s %s: %s" % (name, label, r[-1][3][:300]), file=sys.stderr)
            sys.stdout.flush()
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    print("load average: %.2f %.2f %.2f" % os.getloadavg(), file=sys.stderr)


if __name__ == "__main__":
    main()
