#!/usr/bin/env python3
"""A longer run of a real job, made from its traces: every rank's events repeated COPIES times.

    longer_trace.py SRC OUT COPIES

SRC is a trace file or a directory of rank traces (.json / .json.gz); OUT is the file (for a
file) or the directory (for a directory) to write, each trace under its own name. Copy k is
shifted past copy k-1 in time, its correlation ids, "External id"s and flow ids are made its own,
and its ProfilerStep#N become the steps that follow the previous copy's, so the result reads as
the same job running COPIES times longer: more steps, more kernels, the same shapes. Process and
thread names are written once. The output is the same for the same input (the goldens of
tests/golden/hta and bench/analyze_bench.py depend on that).
"""
import gzip
import json
import os
import re
import sys

ID_ARGS = ("correlation", "External id")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def repeated_events(events, copies):
    """The events of `copies` runs, one after the other (a generator)."""
    stamps = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = (max(stamps) - min(stamps)) + 1000 if stamps else 0
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    ids = [e["id"] for e in events if isinstance(e.get("id"), int)]
    for e in events:
        args = e.get("args")
        if isinstance(args, dict):
            ids += [args[k] for k in ID_ARGS if isinstance(args.get(k), int)]
    id_span = (max(ids) - min(ids) + 1) if ids else 0
    for k in range(copies):
        for e in events:
            if k and e.get("ph") == "M":
                continue
            if k == 0:
                yield e
                continue
            c = dict(e)
            if isinstance(c.get("ts"), (int, float)):
                c["ts"] = c["ts"] + k * span
            if isinstance(c.get("id"), int):
                c["id"] = c["id"] + k * id_span
            m = STEP.match(str(c.get("name", "")))
            if m:
                c["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_span}"
            args = c.get("args")
            if isinstance(args, dict) and any(isinstance(args.get(a), int) for a in ID_ARGS):
                args = dict(args)
                for a in ID_ARGS:
                    # 0 and -1 mean "none" in Kineto's traces: they stay.
                    if isinstance(args.get(a), int) and args[a] > 0:
                        args[a] += k * id_span
                c["args"] = args
            yield c


def write_trace(path, doc, events):
    """Writes `doc` with its traceEvents replaced by `events` (an iterable), streaming (gzip for
    a name ending in .gz); returns the size of its JSON text."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    opener = gzip.open if path.endswith(".gz") else open
    size = 0
    tmp = path + ".tmp"
    with opener(tmp, "wt") as f:
        def put(text):
            nonlocal size
            f.write(text)
            size += len(text.encode())

        put("{")
        for key, value in head.items():
            put(json.dumps(key) + ": " + json.dumps(value) + ",\n")
        put('"traceEvents": [\n')
        batch, first = [], True
        for e in events:
            batch.append(json.dumps(e))
            if len(batch) == 20000:
                put(("" if first else ",\n") + ",\n".join(batch))
                batch, first = [], False
        if batch:
            put(("" if first else ",\n") + ",\n".join(batch))
        put("\n]}\n")
    os.replace(tmp, path)
    return size


def longer_trace(src, out, copies):
    """Writes the longer traces; returns {output path: JSON size}."""
    if os.path.isdir(src):
        os.makedirs(out, exist_ok=True)
        names = sorted(n for n in os.listdir(src) if n.endswith(".json") or n.endswith(".json.gz"))
        pairs = [(os.path.join(src, n), os.path.join(out, n)) for n in names]
    else:
        pairs = [(src, out)]
    sizes = {}
    for s, o in pairs:
        doc = _load(s)
        sizes[o] = write_trace(o, doc, repeated_events(doc["traceEvents"], copies))
    return sizes


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    src, out, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if copies < 1:
        raise SystemExit(f"COPIES must be at least 1, got {copies}")
    longer_trace(src, out, copies)


if __name__ == "__main__":
    main()
