#!/usr/bin/python3
"""HTA's own test calls, through the Python API, timed with HTA and with opscope in one run.

    /usr/bin/python3 bench/hta_api_bench.py [--package build/python] [--runs 5] [--only REGEX]

Every call the public-API tests of HTA's suite (../shared/peers/hta-tests/tests) make on data
that is in ../shared, with the tests' arguments: each analyzer's constructor on its trace folder,
then each method. One pass makes every call once, in a fresh process per side (imports are not
timed; the constructor is a call of its own, the methods run on the analyzer it made, as in the
tests). Passes alternate between the two sides (HTA, opscope, opscope, HTA, ...) so that both
see the same load; each call's figure is the median of its --runs passes. The target (issue 36)
is opscope at least 20 x faster on every call that takes HTA more than 0.5 s.

HTA runs with its defaults (µs rounding on) and CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1, as
its critical-path tests set it; opscope with the same environment. Writes the table as JSON to
build/bench-results/hta-api-<date-time>.json as well.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("OPSCOPE_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
HTA = os.path.join(SHARED, "peers", "hta")
DATA = os.path.join(SHARED, "peers", "hta-tests", "tests", "data")

CP_ANNOTATION = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"

# (call id, trace folder under DATA, method, positional args, keyword args); method None: the
# constructor. A kwarg value "$tmp" is a fresh temporary folder; an argument "$cp:<id>" what
# the call <id> returned (a critical path's graph, a time series), as the tests pass it on.
CALLS = [
    ("mtia: TraceAnalysis()", "mtia_trace_single_rank", None, [], {}),
    ("mtia: get_temporal_breakdown", "mtia_trace_single_rank", "get_temporal_breakdown", [],
     {"visualize": False}),
    ("mtia: get_gpu_kernel_breakdown", "mtia_trace_single_rank", "get_gpu_kernel_breakdown", [],
     {"visualize": False, "include_memory_kernels": True}),
    ("mtia: get_idle_time_breakdown", "mtia_trace_single_rank", "get_idle_time_breakdown", [],
     {"ranks": [0], "visualize": False, "show_idle_interval_stats": True}),
    ("mtia: get_queue_length_summary", "mtia_trace_single_rank", "get_queue_length_summary", [],
     {"ranks": [0]}),
    ("mtia: get_queue_length_time_series", "mtia_trace_single_rank",
     "get_queue_length_time_series", [], {}),
    ("mtia: get_time_spent_blocked_on_full_queue", "mtia_trace_single_rank",
     "get_time_spent_blocked_on_full_queue", ["$cp:mtia: get_queue_length_time_series"],
     {"max_queue_length": 1}),
    ("mtia: get_cuda_kernel_launch_stats", "mtia_trace_single_rank",
     "get_cuda_kernel_launch_stats", [], {"visualize": False}),
    ("mtia: get_aten_op_kernels_and_delay", "mtia_trace_single_rank",
     "get_aten_op_kernels_and_delay", [],
     {"sort_by": ["occurrence_count", "avg_aten_op_launch_delay"]}),
    ("ns: TraceAnalysis()", "ns_resolution_trace", None, [], {}),
    ("ns: get_gpu_user_annotation_breakdown (GPU)", "ns_resolution_trace",
     "get_gpu_user_annotation_breakdown", [],
     {"visualize": False, "num_kernels": 1000, "use_gpu_annotation": True}),
    ("ns: get_gpu_user_annotation_breakdown (CPU)", "ns_resolution_trace",
     "get_gpu_user_annotation_breakdown", [],
     {"visualize": False, "num_kernels": 1000, "use_gpu_annotation": False}),
    ("ns: get_gpu_user_annotation_breakdown (allow-list)", "ns_resolution_trace",
     "get_gpu_user_annotation_breakdown", [],
     {"visualize": False, "num_kernels": 5, "use_gpu_annotation": False,
      "allowlist_patterns": ["Optimizer"]}),
    ("ns: get_gpu_kernels_with_user_annotations", "ns_resolution_trace",
     "get_gpu_kernels_with_user_annotations", [],
     {"rank": 0, "expand_names": True, "shorten_names": True}),
    ("ns: critical_path_analysis", "ns_resolution_trace", "critical_path_analysis", [],
     {"rank": 0, "annotation": "ProfilerStep", "instance_id": 1}),
    ("df_index_resolver: TraceAnalysis()", "df_index_resolver", None, [], {}),
    ("df_index_resolver: get_frequent_cuda_kernel_sequences", "df_index_resolver",
     "get_frequent_cuda_kernel_sequences", [],
     {"operator_name": "aten::clone", "output_dir": "$tmp", "rank": 1, "visualize": False,
      "compress_other_kernels": True}),
    ("cupti_profiler: TraceAnalysis()", "cupti_profiler", None, [], {}),
    ("cupti_profiler: get_cupti_counter_data_with_operators", "cupti_profiler",
     "get_cupti_counter_data_with_operators", [], {}),
    ("simple_add: TraceAnalysis()", "critical_path/simple_add", None, [], {}),
    ("simple_add: critical_path_analysis", "critical_path/simple_add", "critical_path_analysis",
     [], {"rank": 0, "annotation": CP_ANNOTATION, "instance_id": 1}),
    ("simple_add: overlay_critical_path_analysis", "critical_path/simple_add",
     "overlay_critical_path_analysis", [0, "$cp:simple_add: critical_path_analysis"],
     {"output_dir": "$tmp", "only_show_critical_events": False, "show_all_edges": True}),
    ("alexnet: TraceAnalysis()", "critical_path/alexnet", None, [], {}),
    ("alexnet: critical_path_analysis", "critical_path/alexnet", "critical_path_analysis", [],
     {"rank": 0, "annotation": CP_ANNOTATION, "instance_id": 1}),
    ("event_sync: TraceAnalysis()", "critical_path/cuda_event_sync", None, [], {}),
    ("event_sync: critical_path_analysis", "critical_path/cuda_event_sync",
     "critical_path_analysis", [], {"rank": 0, "annotation": "ProfilerStep", "instance_id": 0}),
    ("event_sync_multi_stream: TraceAnalysis()", "critical_path/cuda_event_sync_multi_stream",
     None, [], {}),
    ("event_sync_multi_stream: critical_path_analysis",
     "critical_path/cuda_event_sync_multi_stream", "critical_path_analysis", [],
     {"rank": 0, "annotation": "", "instance_id": None}),
    ("amd: TraceAnalysis()", "amd_trace", None, [], {}),
    ("amd: critical_path_analysis", "amd_trace", "critical_path_analysis", [],
     {"rank": 0, "annotation": "ProfilerStep", "instance_id": 1}),
    ("end_to_end: TraceAnalysis()", "critical_path/end_to_end/simple_add/input", None, [], {}),
    ("end_to_end: critical_path_analysis", "critical_path/end_to_end/simple_add/input",
     "critical_path_analysis", [],
     {"rank": 0, "annotation": "", "instance_id": 0, "data_load_events": ["data_load"]}),
    ("trace_compare: TraceDiff.compare_traces (CPU)", "trace_compare", "compare_traces", [],
     {"device_type": "CPU"}),
    ("trace_compare: TraceDiff.ops_diff (CPU)", "trace_compare", "ops_diff", [],
     {"device_type": "CPU"}),
]

# One pass, in its own process: argv = peer, call-id regex; prints {call id: seconds or null}.
WORKER = r'''
import json, os, re, sys, tempfile, time, warnings, logging
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
peer, only = sys.argv[1], re.compile(sys.argv[2])
calls = json.loads(sys.stdin.read())
if peer == "hta":
    from hta.trace_analysis import TraceAnalysis
    from hta.trace_diff import TraceDiff, LabeledTrace, DeviceType
else:
    from opscope.analysis import TraceAnalysis, TraceDiff, LabeledTrace, DeviceType
# Imports are not timed, on either side: HTA imports plotly with its modules, opscope when it
# first draws, and both import plotly's renderers at the first fig.show()
# (get_aten_op_kernels_and_delay always shows its table: 0.3-0.6 s of imports).
import plotly.express, plotly.graph_objects, plotly.io._renderers  # noqa: E401,F401
analyzers, results, out = {}, {}, {}
for cid, folder, method, args, kwargs in calls:
    if not only.search(cid):
        continue
    tmp = tempfile.mkdtemp(prefix="hta-api-bench-")
    args = [results.get(a[4:]) if isinstance(a, str) and a.startswith("$cp:") else a for a in args]
    kwargs = {k: (tmp if v == "$tmp" else v) for k, v in kwargs.items()}
    try:
        if method in ("compare_traces", "ops_diff"):
            base = os.path.join(folder, "base"); test = os.path.join(folder, "test")
            base, test = LabeledTrace(label="Base", trace_dir=base), LabeledTrace(label="Test", trace_dir=test)
            kwargs = dict(kwargs, device_type=DeviceType[kwargs["device_type"]])
            t0 = time.perf_counter()
            getattr(TraceDiff, method)(base, test, 1, 1, 1010, 1010, **kwargs)
            out[cid] = time.perf_counter() - t0
            continue
        if method is None:
            t0 = time.perf_counter()
            analyzers[folder] = TraceAnalysis(trace_dir=folder)
            out[cid] = time.perf_counter() - t0
            continue
        a = analyzers.get(folder) or TraceAnalysis(trace_dir=folder)
        analyzers[folder] = a
        if any(x is None for x in args):
            out[cid] = None
            continue
        t0 = time.perf_counter()
        r = getattr(a, method)(*args, **kwargs)
        out[cid] = time.perf_counter() - t0
        results[cid] = r[0] if isinstance(r, tuple) else r  # critical_path_analysis: the graph
    except Exception as e:  # a call the side lacks or fails: no figure
        print(f"{peer}: {cid}: {type(e).__name__}: {e}"[:300], file=sys.stderr)
        out[cid] = None
print(json.dumps(out))
'''


def one_pass(peer: str, package: str, only: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(package), HTA])
    env["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
    env.pop("HTA_DISABLE_NS_ROUNDING", None)
    calls = [(c, os.path.join(DATA, f), m, a, k) for c, f, m, a, k in CALLS]
    proc = subprocess.run([sys.executable, "-c", WORKER, peer, only], input=json.dumps(calls),
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{peer} pass failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    errors = proc.stderr.strip()
    if errors:
        print(errors, file=sys.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default=os.path.join(ROOT, "build", "python"))
    parser.add_argument("--runs", type=int, default=5, help="passes per side (median)")
    parser.add_argument("--only", default=".", help="a regex of the call ids to time")
    args = parser.parse_args()
    if not os.path.isdir(DATA) or not os.path.isdir(HTA):
        print(f"HTA or its test data is missing ({HTA}, {DATA})")
        return 2

    times = {"hta": {}, "opscope": {}}
    order = ["hta", "opscope"]
    for run in range(args.runs):
        for peer in (order if run % 2 == 0 else order[::-1]):
            for cid, seconds in one_pass(peer, args.package, args.only).items():
                times[peer].setdefault(cid, []).append(seconds)
        print(f"pass {run + 1} of {args.runs} done", file=sys.stderr)

    load = os.getloadavg()
    stamp = datetime.datetime.now(datetime.timezone.utc)
    print(f"{stamp:%Y-%m-%d %H:%M} UTC, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{args.runs} passes per side, medians")
    print(f"| call | HTA | opscope | HTA / opscope | target |")
    print(f"|---|---:|---:|---:|---|")
    rows = []
    for cid, *_ in CALLS:
        if cid not in times["hta"]:
            continue

        def median(peer):
            got = [s for s in times[peer].get(cid, []) if s is not None]
            return statistics.median(got) if len(got) == args.runs else None

        h, o = median("hta"), median("opscope")
        ratio = h / o if h is not None and o else None
        target = "-" if h is None or h <= 0.5 else ("✔" if ratio and ratio >= 20 else "✘")
        fmt = lambda s: "—" if s is None else (f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s")
        print(f"| {cid} | {fmt(h)} | {fmt(o)} | "
              f"{'—' if ratio is None else f'{ratio:.1f} ×'} | {target} |")
        rows.append({"call": cid, "hta_s": h, "opscope_s": o, "ratio": ratio})
    out_dir = os.path.join(ROOT, "build", "bench-results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"hta-api-{stamp:%Y%m%d-%H%M%S}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"date": stamp.isoformat(), "load": load, "runs": args.runs, "rows": rows}, f,
                  indent=1)
    print(f"written: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
