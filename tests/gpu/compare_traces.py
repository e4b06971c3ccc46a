#!/usr/bin/env python3
"""Side-by-side summary of two Chrome/Kineto traces (issue 35: opscope's against torch's).

    python3 tests/gpu/compare_traces.py OURS.json[.gz] TORCH.json[.gz] [--out SUMMARY.txt]

Standard library only, so that it runs on the device machine and here alike. For each trace:
events per category; kernels and their most frequent names; runtime and driver calls by name;
ac2g flows, where they start and on what they end (kernel, memcpy, memset, sync); GPU events
with an "External id" and how many of those name a CPU range (cpu_op / user_annotation) of the
same trace; deviceProperties and its keys; the GPU processes' and threads' names and what lies
on each thread; the top-level metadata keys; the arg keys seen per category. Then the
DIFFERENCES: what one trace has and the other lacks.

Exits 0 whatever the traces hold; 2 when a file cannot be read or is not a trace.
"""

import collections
import gzip
import json
import sys

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_event",
            "gpu_user_annotation")
CPU_RANGE_CATS = ("cpu_op", "user_annotation")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
NAME_WIDTH = 100


class Unreadable(Exception):
    pass


def load(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as err:
        raise Unreadable(f"{path}: cannot read it: {err.strerror or err}")
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, ValueError) as err:
        raise Unreadable(f"{path}: not a (gzipped) JSON trace: {err}")
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents", []), list):
        raise Unreadable(f"{path}: not a Chrome trace (want an object with a traceEvents list "
                         f"or a list of events, found {type(data).__name__})")
    return data


def cat_of(e):
    if e.get("ph") == "M":
        return "(metadata)"
    if e.get("cat") is None:
        return "(no cat)"
    return str(e.get("cat"))


def short(name):
    name = str(name)
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 3] + "..."


def summarize(trace):
    events = [e for e in trace.get("traceEvents") or [] if isinstance(e, dict)]
    s = {}
    s["top_level_keys"] = sorted(k for k in trace if k != "traceEvents")
    s["events"] = len(events)
    cats = collections.Counter(cat_of(e) for e in events)
    s["categories"] = cats
    kernels = collections.Counter(e.get("name") for e in events if e.get("cat") == "kernel")
    s["kernels"] = sum(kernels.values())
    s["kernel_names"] = kernels.most_common(10)
    s["runtime_calls"] = collections.Counter(
        f"{e.get('cat')}: {e.get('name')}" for e in events if e.get("cat") in RUNTIME_CATS)
    # CUPTI's callback ids per name: Kineto names a call from its own cbid table, so a name
    # unknown to that table shows here with the id that CUPTI gave.
    cbids = collections.defaultdict(set)
    for e in events:
        if e.get("cat") in RUNTIME_CATS and "cbid" in (e.get("args") or {}):
            cbids[f"{e.get('cat')}: {e.get('name')}"].add(str(e["args"]["cbid"]))
    s["runtime_cbids"] = cbids

    # ac2g flows: Kineto's flow id is the correlation id, and the end ('f', bp 'e') lies at the
    # GPU event's pid/tid/ts; the start ('s') at the runtime call's. Match by id first (a GPU
    # event's args.correlation), then by place.
    by_corr = {}
    by_place = {}
    for e in events:
        args = e.get("args") or {}
        if e.get("ph") != "X":
            continue
        place = (e.get("pid"), e.get("tid"), e.get("ts"))
        by_place.setdefault(place, e)
        if e.get("cat") in GPU_CATS and "correlation" in args:
            by_corr.setdefault(str(args["correlation"]), e)
    flow_events = [e for e in events if e.get("cat") == "ac2g" and e.get("ph") in ("s", "t", "f")]
    s["ac2g_events"] = len(flow_events)
    ids = collections.defaultdict(set)
    for e in flow_events:
        ids[str(e.get("id"))].add(e.get("ph"))
    s["ac2g_flows"] = sum(1 for phs in ids.values() if "s" in phs and "f" in phs)
    s["ac2g_lone_ids"] = sum(1 for phs in ids.values() if not ("s" in phs and "f" in phs))
    ends = collections.Counter()
    starts = collections.Counter()
    for e in flow_events:
        place = (e.get("pid"), e.get("tid"), e.get("ts"))
        if e.get("ph") == "f":
            target = by_place.get(place)
            if target is None or target.get("cat") not in GPU_CATS:
                target = by_corr.get(str(e.get("id")), target)
            ends[cat_of(target) if target is not None else "(nothing there)"] += 1
        elif e.get("ph") == "s":
            source = by_place.get(place)
            starts[f"{cat_of(source)}: {source.get('name')}" if source is not None
                   else "(nothing there)"] += 1
    s["ac2g_ends_on"] = ends
    s["ac2g_starts_on"] = starts

    cpu_ext = set()
    for e in events:
        if e.get("cat") in CPU_RANGE_CATS:
            ext = (e.get("args") or {}).get("External id")
            if ext is not None:
                cpu_ext.add(str(ext))
    ext_per_cat = collections.Counter()
    matched_per_cat = collections.Counter()
    # Some Kineto versions (HTA's 2023 test traces) write a GPU event's correlation id as its
    # External id, so it names no CPU range; newer ones write the launching op's.
    is_corr_per_cat = collections.Counter()
    gpu_per_cat = collections.Counter()
    for e in events:
        if e.get("cat") not in GPU_CATS or e.get("ph") != "X":
            continue
        gpu_per_cat[e["cat"]] += 1
        ext = (e.get("args") or {}).get("External id")
        if ext is not None:
            ext_per_cat[e["cat"]] += 1
            if str(ext) in cpu_ext:
                matched_per_cat[e["cat"]] += 1
            if str(ext) == str((e.get("args") or {}).get("correlation")):
                is_corr_per_cat[e["cat"]] += 1
    s["gpu_events"] = gpu_per_cat
    s["gpu_with_external_id"] = ext_per_cat
    s["gpu_external_id_matched"] = matched_per_cat
    s["gpu_external_id_is_correlation"] = is_corr_per_cat

    props = trace.get("deviceProperties")
    s["deviceProperties"] = (
        "absent" if props is None else f"{len(props)} device(s)" if isinstance(props, list)
        else f"not a list ({type(props).__name__})")
    keys = set()
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict):
                keys.update(p)
    s["deviceProperties_keys"] = sorted(keys)

    # GPU processes: labelled "GPU n" (Kineto) or holding GPU events.
    proc_names, proc_labels, thread_names = {}, {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        args = e.get("args") or {}
        if e.get("name") == "process_name":
            proc_names[e.get("pid")] = args.get("name")
        elif e.get("name") == "process_labels":
            proc_labels[e.get("pid")] = args.get("labels")
        elif e.get("name") == "thread_name":
            thread_names[(e.get("pid"), e.get("tid"))] = args.get("name")
    gpu_pids = {p for p, label in proc_labels.items() if str(label).startswith("GPU")}
    on_thread = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("cat") in GPU_CATS and e.get("ph") == "X":
            gpu_pids.add(e.get("pid"))
            on_thread[(e.get("pid"), e.get("tid"))][e["cat"]] += 1
    rows = []
    for pid in sorted(gpu_pids, key=str):
        tids = {t for (p, t) in thread_names if p == pid} | {t for (p, t) in on_thread if p == pid}
        if not tids and pid not in proc_labels:
            continue
        rows.append(f"pid {pid!r}: process_name {proc_names.get(pid)!r}, "
                    f"labels {proc_labels.get(pid)!r}")
        for tid in sorted(tids, key=str):
            held = ", ".join(f"{c} {n}" for c, n in sorted(on_thread[(pid, tid)].items()))
            rows.append(f"  tid {tid!r}: {thread_names.get((pid, tid))!r}"
                        + (f" holds {held}" if held else " (no GPU events)"))
    s["gpu_processes"] = rows

    arg_keys = collections.defaultdict(set)
    for e in events:
        if e.get("ph") == "M":
            continue
        arg_keys[cat_of(e)].update((e.get("args") or {}).keys())
    s["arg_keys"] = arg_keys

    sync = [e for e in events if e.get("cat") == "cuda_sync"]
    s["sync_examples"] = [json.dumps({k: e.get(k) for k in ("name", "pid", "tid", "args")},
                                     sort_keys=True) for e in sync[:3]]
    s["sync_names"] = collections.Counter(e.get("name") for e in sync)
    return s


def side_by_side(label, a, b, out, width=60):
    a_lines = a if isinstance(a, list) else [str(a)]
    b_lines = b if isinstance(b, list) else [str(b)]
    out.append(f"{label}")
    if any(len(line) > width for line in a_lines):
        # Too wide for two columns: one block per trace.
        out.extend(f"  A: {line}" for line in a_lines)
        out.extend(f"  B: {line}" for line in b_lines)
        return
    for i in range(max(len(a_lines), len(b_lines), 1)):
        left = a_lines[i] if i < len(a_lines) else ""
        right = b_lines[i] if i < len(b_lines) else ""
        out.append(f"  {left:<{width}} | {right}")


def counter_lines(counter, limit=None):
    items = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))
    if limit:
        items = items[:limit]
    return [f"{n:7d}  {short(k)}" for k, n in items] or ["(none)"]


def report(path_a, a, path_b, b):
    out = [f"A = {path_a}", f"B = {path_b}", ""]
    side_by_side("events", a["events"], b["events"], out)
    side_by_side("events per category", counter_lines(a["categories"]),
                 counter_lines(b["categories"]), out)
    side_by_side("kernels", a["kernels"], b["kernels"], out)
    out.append("kernel names, top 10 by count")
    for label, s in (("A", a), ("B", b)):
        for name, n in s["kernel_names"] or [("(none)", 0)]:
            out.append(f"  {label} {n:6d}  {short(name)}")
    def runtime_lines(s):
        lines = []
        for line, (name, _) in zip(counter_lines(s["runtime_calls"]),
                                   sorted(s["runtime_calls"].items(),
                                          key=lambda kv: (-kv[1], str(kv[0])))):
            ids = s["runtime_cbids"].get(name)
            lines.append(line + (f" (cbid {','.join(sorted(ids))})" if ids else ""))
        return lines or ["(none)"]

    side_by_side("runtime/driver calls", runtime_lines(a), runtime_lines(b), out)
    side_by_side("ac2g: flow events / ids with both s and f / ids with one only (Kineto puts a "
                 "lone f on runtime calls that launched nothing)",
                 f"{a['ac2g_events']} / {a['ac2g_flows']} / {a['ac2g_lone_ids']}",
                 f"{b['ac2g_events']} / {b['ac2g_flows']} / {b['ac2g_lone_ids']}", out)
    side_by_side("ac2g flows end on", counter_lines(a["ac2g_ends_on"]),
                 counter_lines(b["ac2g_ends_on"]), out)
    side_by_side("ac2g flows start on", counter_lines(a["ac2g_starts_on"], 12),
                 counter_lines(b["ac2g_starts_on"], 12), out)

    def ext_lines(s):
        lines = []
        for cat, n in sorted(s["gpu_events"].items()):
            lines.append(f"{cat}: {n} events, {s['gpu_with_external_id'][cat]} with External id, "
                         f"{s['gpu_external_id_matched'][cat]} name a CPU range, "
                         f"{s['gpu_external_id_is_correlation'][cat]} equal their correlation")
        return lines or ["(no GPU events)"]

    side_by_side("GPU events and External ids", ext_lines(a), ext_lines(b), out)
    side_by_side("deviceProperties", a["deviceProperties"], b["deviceProperties"], out)
    side_by_side("deviceProperties keys", a["deviceProperties_keys"] or ["(none)"],
                 b["deviceProperties_keys"] or ["(none)"], out)
    for label, s in (("A", a), ("B", b)):
        out.append(f"GPU processes and threads, {label}")
        out.extend("  " + r for r in s["gpu_processes"] or ["(none)"])
    for label, s in (("A", a), ("B", b)):
        out.append(f"cuda_sync, {label}: " + (", ".join(
            f"{n} {k}" for k, n in sorted(s["sync_names"].items())) or "(none)"))
        out.extend("  " + x for x in s["sync_examples"])
    side_by_side("top-level keys", a["top_level_keys"], b["top_level_keys"], out)
    out.append("arg keys per category")
    absent = "(category absent or no args)"
    for cat in sorted(set(a["arg_keys"]) | set(b["arg_keys"])):
        out.append(f"  {cat}")
        out.append(f"    A: {', '.join(sorted(a['arg_keys'].get(cat, ()))) or absent}")
        out.append(f"    B: {', '.join(sorted(b['arg_keys'].get(cat, ()))) or absent}")

    out.append("")
    out.append("DIFFERENCES")
    diffs = []
    ca, cb = set(a["categories"]), set(b["categories"])
    if ca - cb:
        diffs.append(f"categories in A only: {', '.join(sorted(ca - cb))}")
    if cb - ca:
        diffs.append(f"categories in B only: {', '.join(sorted(cb - ca))}")
    for cat in sorted(ca & cb):
        ka, kb = a["arg_keys"].get(cat, set()), b["arg_keys"].get(cat, set())
        if ka - kb:
            diffs.append(f"{cat}: arg keys in A only: {', '.join(sorted(ka - kb))}")
        if kb - ka:
            diffs.append(f"{cat}: arg keys in B only: {', '.join(sorted(kb - ka))}")
    ra, rb = set(a["runtime_calls"]), set(b["runtime_calls"])
    if ra - rb:
        diffs.append(f"runtime/driver names in A only: {', '.join(sorted(ra - rb))}")
    if rb - ra:
        diffs.append(f"runtime/driver names in B only: {', '.join(sorted(rb - ra))}")
    ta, tb = set(a["top_level_keys"]), set(b["top_level_keys"])
    if ta - tb:
        diffs.append(f"top-level keys in A only: {', '.join(sorted(ta - tb))}")
    if tb - ta:
        diffs.append(f"top-level keys in B only: {', '.join(sorted(tb - ta))}")
    pa, pb = set(a["deviceProperties_keys"]), set(b["deviceProperties_keys"])
    if pa - pb:
        diffs.append(f"deviceProperties keys in A only: {', '.join(sorted(pa - pb))}")
    if pb - pa:
        diffs.append(f"deviceProperties keys in B only: {', '.join(sorted(pb - pa))}")
    ea, eb = set(a["ac2g_ends_on"]), set(b["ac2g_ends_on"])
    if ea != eb:
        diffs.append(f"ac2g flows end on: A {', '.join(sorted(ea)) or '(none)'}; "
                     f"B {', '.join(sorted(eb)) or '(none)'}")
    sa, sb = set(a["sync_names"]), set(b["sync_names"])
    if sa != sb:
        diffs.append(f"cuda_sync names: A {', '.join(sorted(map(str, sa))) or '(none)'}; "
                     f"B {', '.join(sorted(map(str, sb))) or '(none)'}")
    if a["kernels"] != b["kernels"]:
        diffs.append(f"kernels: A {a['kernels']}, B {b['kernels']}")
    out.extend("  " + d for d in diffs or ["(none)"])
    return "\n".join(out) + "\n"


def main(argv):
    args = list(argv[1:])
    out_path = None
    if "--out" in args:
        i = args.index("--out")
        if i + 1 >= len(args):
            print("compare_traces: --out needs a file name", file=sys.stderr)
            return 2
        out_path = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print("usage: compare_traces.py OURS.json[.gz] TORCH.json[.gz] [--out SUMMARY.txt]",
              file=sys.stderr)
        return 2
    try:
        a, b = load(args[0]), load(args[1])
    except Unreadable as err:
        print(f"compare_traces: {err}", file=sys.stderr)
        return 2
    text = report(args[0], summarize(a), args[1], summarize(b))
    sys.stdout.write(text)
    sys.stdout.flush()
    if out_path:
        try:
            with open(out_path, "w") as f:
                f.write(text)
        except OSError as err:
            print(f"compare_traces: cannot write {out_path}: {err}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
