#!/usr/bin/env python3
"""HTA's critical_path_analysis against opscope's, side by side in one process, on every
critical-path trace of HTA's tests.

    PYTHONPATH=build/python /usr/bin/python3 bench/hta_critical_path.py [--runs 7]
                                                [--ctor-runs 3] [--shared ../shared]

For each trace (with the annotation and instance HTA's tests use) it times, as the median of
interleaved runs (HTA, opscope, HTA, opscope, ... so that both see the same load):
  * call: critical_path_analysis(rank=0, ...) on an analyzer built beforehand (the constructor
    excluded);
  * call+graph: opscope's call and then everything HTA's call makes made too (CPGraph makes
    its networkx dicts, CPNode and CPEdge objects and maps when first read; HTA's call makes
    them all);
  * ctor+call: the constructor (reading the trace) and the call, --ctor-runs times.
Both sides keep nanoseconds (HTA_DISABLE_NS_ROUNDING=1) and add HTA's zero-weight launch edges
(CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1), as HTA's tests do. Prints a table (seconds and
HTA / opscope ratios) and the load average.
"""
import argparse
import logging
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    ("critical_path/simple_add", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1, None),
    ("critical_path/alexnet", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1, None),
    ("critical_path/cuda_event_sync", "ProfilerStep", 0, None),
    ("critical_path/cuda_event_sync_multi_stream", "", None, None),
    ("critical_path/end_to_end/simple_add/input", "", 0, ["data_load"]),
    ("ns_resolution_trace", "ProfilerStep", 1, None),
    ("amd_trace", "ProfilerStep", 1, None),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ctor-runs", type=int, default=3)
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    args = ap.parse_args()
    data = os.path.join(args.shared, "peers", "hta-tests", "tests", "data")
    os.environ["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    sys.path.insert(0, os.path.join(args.shared, "peers", "hta"))
    logging.disable(logging.WARNING)
    import contextlib
    import io

    from hta.trace_analysis import TraceAnalysis as HtaAnalysis

    from opscope.analysis import TraceAnalysis as OpsAnalysis

    def call(analyzer, case):
        _, annotation, instance, loads = case
        with contextlib.redirect_stdout(io.StringIO()):
            return analyzer.critical_path_analysis(
                rank=0, annotation=annotation, instance_id=instance, data_load_events=loads
            )

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def touch(g):
        # What HTA's call makes and opscope's makes when first read: the networkx dicts, the
        # node objects, the maps and the path's edges.
        g._adj, g.node_list, g.edge_to_event_map, g.critical_path_edges_set
        g.event_to_start_node_map, g.event_to_end_node_map, g.critical_path_events_set

    rows = []
    for case in CASES:
        path = os.path.join(data, case[0])
        if not os.path.isdir(path):
            print(f"skip {case[0]}: no {path}", file=sys.stderr)
            continue
        hta, ops = HtaAnalysis(trace_dir=path), OpsAnalysis(trace_dir=path)
        call(hta, case), call(ops, case)  # warm up (imports, caches)
        t = {"hta": [], "ops": [], "ops_graph": [], "hta_ctor": [], "ops_ctor": []}
        for _ in range(args.runs):
            t["hta"].append(timed(lambda: call(hta, case)))
            t["ops"].append(timed(lambda: call(ops, case)))
            t["ops_graph"].append(timed(lambda: touch(call(ops, case)[0])))
        for _ in range(args.ctor_runs):
            t["hta_ctor"].append(timed(lambda: call(HtaAnalysis(trace_dir=path), case)))
            t["ops_ctor"].append(timed(lambda: call(OpsAnalysis(trace_dir=path), case)))
        m = {k: statistics.median(v) for k, v in t.items()}
        rows.append((case[0], m))

    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}, load average {os.getloadavg()}, "
          f"medians of {args.runs} interleaved runs ({args.ctor_runs} with the constructor)")
    head = (f"{'trace':46} {'HTA call':>9} {'ops call':>9} {'ratio':>6} {'+graph':>8} {'ratio':>6}"
            f" {'HTA ctor+call':>13} {'ops ctor+call':>13} {'ratio':>6}")
    print(head)
    for name, m in rows:
        print(f"{name:46} {m['hta']:9.4f} {m['ops']:9.4f} {m['hta'] / m['ops']:6.1f}"
              f" {m['ops_graph']:8.4f} {m['hta'] / m['ops_graph']:6.1f}"
              f" {m['hta_ctor']:13.4f} {m['ops_ctor']:13.4f} {m['hta_ctor'] / m['ops_ctor']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
