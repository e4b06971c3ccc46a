#!/usr/bin/env python3
"""The HTA methods of python/opscope/_hta_methods.py against Holistic Trace Analysis, side by side.

    PYTHONPATH=build/python /usr/bin/python3 bench/hta_methods_bench.py [--runs 5]

Each method is called on the trace of HTA's test that calls it, by HTA and by opscope in the
same process, their runs interleaved (HTA, opscope, HTA, ...) so that both see the same load.
A run times the call alone, on an analyzer built fresh for it (outside that timing; opscope's
HTA-shaped view ``t``, which get_potential_stragglers and get_gpu_kernels_with_user_annotations
read, is then built inside the call, as HTA's frame is in its constructor), and the constructor
with the call ("+ctor": what a user waits for). Prints the medians of --runs per method and
side, and the speed-ups. HTA runs with HTA_DISABLE_NS_ROUNDING=1 (the
numbers agree with opscope's then; with rounding its times are the same within noise).
"""
import argparse
import logging
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("OPSCOPE_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
HTA = os.path.join(SHARED, "peers", "hta")
DATA = os.path.join(SHARED, "peers", "hta-tests", "tests", "data")
TRACES = os.path.join(SHARED, "peers", "kineto-traces")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    logging.disable(logging.WARNING)
    sys.path.insert(0, HTA)
    import plotly.graph_objects as go

    go.Figure.show = lambda *a, **k: None  # HTA's ATen table is always shown; both draw it
    import hta.trace_analysis
    import hta.trace_diff
    import opscope.analysis as ours

    ns = os.path.join(DATA, "ns_resolution_trace")
    mtia = os.path.join(DATA, "mtia_trace_single_rank")
    cupti = os.path.join(TRACES, "cupti_profiler")
    job = os.path.join(TRACES, "trace_filter")
    base = os.path.join(DATA, "trace_compare", "base")
    test = os.path.join(DATA, "trace_compare", "test")
    CPU = hta.trace_diff.DeviceType.CPU

    # (what, trace dir, call(analysis class module side) -> result)
    cases = [
        ("get_gpu_user_annotation_breakdown (GPU)", ns,
         lambda a: a.get_gpu_user_annotation_breakdown(visualize=False)),
        ("get_gpu_user_annotation_breakdown (CPU, allow-list)", ns,
         lambda a: a.get_gpu_user_annotation_breakdown(
             visualize=False, num_kernels=5, use_gpu_annotation=False,
             allowlist_patterns=["Optimizer"])),
        ("get_gpu_kernels_with_user_annotations", ns,
         lambda a: a.get_gpu_kernels_with_user_annotations(rank=0)),
        ("get_aten_op_kernels_and_delay (MTIA)", mtia,
         lambda a: a.get_aten_op_kernels_and_delay(
             sort_by=["occurrence_count", "avg_aten_op_launch_delay"])),
        ("get_cupti_counter_data_with_operators", cupti,
         lambda a: a.get_cupti_counter_data_with_operators()),
        ("get_profiler_steps", job, lambda a: a.get_profiler_steps()),
        ("get_potential_stragglers", job, lambda a: a.get_potential_stragglers()),
        ("get_idle_time_breakdown(show_idle_interval_stats=True)", job,
         lambda a: a.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)),
        ("get_queue_length_summary_from_time_series", job,
         lambda a: a.get_queue_length_summary_from_time_series(
             a.get_queue_length_time_series())),
    ]
    sides = {"HTA": hta.trace_analysis.TraceAnalysis, "opscope": ours.TraceAnalysis}
    rows = []
    for what, directory, call in cases:
        times = {"HTA": [], "opscope": []}
        built = {"HTA": [], "opscope": []}  # constructor + call
        for _ in range(args.runs):
            for side, cls in sides.items():
                start = time.perf_counter()
                analysis = cls(trace_dir=directory)
                made = time.perf_counter()
                call(analysis)
                end = time.perf_counter()
                times[side].append(end - made)
                built[side].append(end - start)
        rows.append((what, statistics.median(times["HTA"]), statistics.median(times["opscope"]),
                     statistics.median(built["HTA"]), statistics.median(built["opscope"])))

    # TraceDiff: LabeledTrace (built outside the timing) compared on the CPU, short names.
    diff = {"HTA": (hta.trace_diff.LabeledTrace, hta.trace_diff.TraceDiff),
            "opscope": (ours.LabeledTrace, ours.TraceDiff)}
    times = {"HTA": [], "opscope": []}
    built = {"HTA": [], "opscope": []}  # compare_traces of the directories: they are read too
    for _ in range(args.runs):
        for side, (labeled, cls) in diff.items():
            c, t = labeled(label="Base", trace_dir=base), labeled(label="Test", trace_dir=test)
            start = time.perf_counter()
            cls.compare_traces(c, t, 1, 1, 1010, 1010, CPU, True)
            times[side].append(time.perf_counter() - start)
            start = time.perf_counter()
            cls.compare_traces(base, test, 1, 1, 1010, 1010, CPU, True)  # directories: read too
            built[side].append(time.perf_counter() - start)
    rows.append(("TraceDiff.compare_traces(LabeledTrace, short names)",
                 statistics.median(times["HTA"]), statistics.median(times["opscope"]),
                 statistics.median(built["HTA"]), statistics.median(built["opscope"])))

    width = max(len(r[0]) for r in rows)
    print(f"{'method':{width}}  {'HTA s':>8}  {'opscope s':>9}  {'speed-up':>8}  "
          f"{'HTA +ctor':>9}  {'ops +ctor':>9}  {'speed-up':>8}")
    for what, h, o, hb, ob in rows:
        print(f"{what:{width}}  {h:8.4f}  {o:9.4f}  {h / o:7.1f}x  {hb:9.3f}  {ob:9.3f}  "
              f"{hb / ob:7.1f}x")
    print(f"(medians of {args.runs} interleaved runs; the call alone on a fresh analyzer, then "
          "with the constructor: +ctor)")


if __name__ == "__main__":
    main()
