#!/usr/bin/env python3
"""Runs Holistic Trace Analysis (the unmodified package in ../shared/peers/hta) on a trace
directory and writes one report's DataFrame as JSON rows, the oracle `opscope analyze` is
compared with (tests/unit/analyze_test.cpp).

    hta_report.py HTA_DIR TRACE_DIR REPORT OUT.json

REPORT is an opscope report name, or "frame": the events HTA's parser keeps, per rank and
category (tests/unit/hta_events_test.cpp). Exit code 3 when HTA's dependencies are missing (pandas,
plotly, ...: scripts/setup-deps installs them); HTA's own failures propagate. With
OPSCOPE_HTA_CACHE set, answers are kept in and read from that folder (hta_answers.py).
"""
import json
import logging
import os
import sys


def temporal(analysis, ranks):
    return {"temporal": analysis.get_temporal_breakdown(visualize=False)}


def kernels(analysis, ranks):
    types, kernel_rows = analysis.get_gpu_kernel_breakdown(visualize=False)
    return {"kernel_type": types, "kernels": kernel_rows}


def overlap(analysis, ranks):
    return {"overlap": analysis.get_comm_comp_overlap(visualize=False)}


def idle(analysis, ranks):
    # Every rank (HTA's default is rank 0 only); visualize=False keeps streams as numbers.
    return {"idle": analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)[0]}


def launch(analysis, ranks):
    # Every rank (HTA's default is rank 0), with HTA's default cutoffs; the summary counts
    # are the ones HTA's three histograms show.
    import pandas as pd

    stats = analysis.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    rows, summary = [], []
    for rank in ranks:
        df = stats[rank].copy()
        df.insert(0, "rank", rank)
        rows.append(df)
        summary.append(
            {
                "rank": rank,
                "launches": len(df),
                "short_kernels": int(
                    ((df.cpu_duration <= 50) & (df.gpu_duration < df.cpu_duration)).sum()
                ),
                "runtime_outliers": int((df.cpu_duration > 50).sum()),
                "launch_delay_outliers": int((df.launch_delay > 100).sum()),
                "launch_delay_median": df.launch_delay.median(),
                "launch_delay_p95": df.launch_delay.quantile(0.95),
            }
        )
    return {"launch": pd.concat(rows, ignore_index=True), "launch_summary": pd.DataFrame(summary)}


def kernel_dist(analysis, ranks):
    # The kernels get_gpu_kernel_breakdown plots one by one (all but "others"), with the
    # statistics of their durations on each rank where they ran, from HTA's rank DataFrames.
    import pandas as pd
    from hta.utils.utils import get_kernel_type

    _, kernel_rows = analysis.get_gpu_kernel_breakdown(visualize=False)
    shown = kernel_rows[kernel_rows["name"] != "others"][["kernel_type", "name"]]
    shown = shown.drop_duplicates()
    sym = analysis.t.symbol_table.get_sym_table()
    out = []
    for rank in ranks:
        df = analysis.t.get_trace(rank)
        gpu = df[df["stream"].ne(-1)].copy()
        gpu["name"] = gpu["name"].apply(lambda x: sym[x])
        gpu["kernel_type"] = gpu["name"].apply(get_kernel_type)
        for kernel_type, name in shown.itertuples(index=False):
            d = gpu[(gpu["name"] == name) & (gpu["kernel_type"] == kernel_type)]["dur"]
            if d.empty:
                continue
            s = d.describe()
            out.append(
                {
                    "kernel_type": kernel_type,
                    "name": name,
                    "rank": rank,
                    "count": int(s["count"]),
                    "sum (us)": d.sum(),
                    "mean (us)": s["mean"],
                    "stddev": 0.0 if len(d) < 2 else s["std"],
                    "min (us)": s["min"],
                    "25%": s["25%"],
                    "50%": s["50%"],
                    "75%": s["75%"],
                    "max (us)": s["max"],
                }
            )
    return {"kernel_dist": pd.DataFrame(out)}


def patterns(analysis, ranks):
    # Every rank; the operator and the shortest sequence from OPSCOPE_HTA_OPERATOR and
    # OPSCOPE_HTA_MIN_PATTERN_LEN (HTA has no default operator). The overlaid trace HTA
    # writes goes to a scratch directory.
    import os
    import tempfile

    import pandas as pd

    operator = os.environ.get("OPSCOPE_HTA_OPERATOR", "")
    min_len = int(os.environ.get("OPSCOPE_HTA_MIN_PATTERN_LEN", "3"))
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for rank in ranks:
            df = analysis.get_frequent_cuda_kernel_sequences(
                operator, scratch, min_pattern_len=min_len, rank=rank, visualize=False
            )
            if df.empty:
                continue
            df.insert(0, "rank", rank)
            out.append(df)
    columns = ["rank", "pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]
    return {"patterns": pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)}


def queue(analysis, ranks):
    # Every rank (HTA's default is rank 0). The summaries are describe() frames indexed by
    # (rank, stream|name) with columns (series, statistic): flattened to rank, stream|name,
    # count, ... The time blocked on a full queue is HTA's, with its one-stream-per-rank dict.
    import pandas as pd
    from hta.analyzers.trace_counters import TraceCounters

    stats = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]

    def flat(df, key):
        if df is None:
            return pd.DataFrame(columns=["rank", key] + stats)
        df = df.copy()
        df.columns = [c[1] for c in df.columns]
        return df.reset_index()

    series = TraceCounters.get_queue_length_time_series(analysis.t, ranks)
    full = analysis.get_time_spent_blocked_on_full_queue(series)
    return {
        "queue_length": flat(analysis.get_queue_length_summary(ranks=ranks), "stream"),
        "memory_bw": flat(analysis.get_memory_bw_summary(ranks=ranks), "name"),
        "queue_full": full,
    }


def frame(trace_dir):
    """The events HTA's parser keeps, counted per rank and category: its DataFrame before it
    aligns or filters anything (as TraceDiff's LabeledTrace loads it; TraceAnalysis filters this
    same frame), which in_hta_frame (src/analysis/hta_events.h) follows."""
    import collections

    import pandas as pd
    from hta.common.trace import Trace

    t = Trace(trace_dir=trace_dir)
    t.parse_traces(use_multiprocessing=False)
    names = t.symbol_table.get_sym_table()
    rows = []
    for rank, df in sorted(t.traces.items()):
        counts = collections.Counter(names[c] for c in df["cat"]) if len(df) else {}
        rows += [{"rank": rank, "category": c, "events": n} for c, n in sorted(counts.items())]
    return {"frame": pd.DataFrame(rows, columns=["rank", "category", "events"])}


# opscope report name -> a function of (TraceAnalysis, its sorted ranks) giving
# {table name: DataFrame}, the tables `opscope analyze --report NAME --format json` prints.
REPORTS = {
    "temporal": temporal,
    "kernels": kernels,
    "overlap": overlap,
    "idle": idle,
    "launch": launch,
    "kernel-dist": kernel_dist,
    "patterns": patterns,
    "queue": queue,
}


def main():
    hta_dir, trace_dir, report, out = sys.argv[1:5]
    # HTA's answer depends on nothing else than what hta_answers keys it by: with
    # OPSCOPE_HTA_CACHE set (scripts/test), each build after the first reads it from there.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hta_answers

    hta_answers.answer(
        __file__, hta_dir, [trace_dir], [report], out, lambda: live(hta_dir, trace_dir, report, out)
    )


def live(hta_dir, trace_dir, report, out):
    sys.path.insert(0, hta_dir)
    try:
        import pandas  # noqa: F401
        import plotly  # noqa: F401
    except ImportError as e:
        print(f"HTA needs {e.name}: run scripts/setup-deps", file=sys.stderr)
        sys.exit(3)
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    if report == "frame":  # not a report: the events every report of HTA starts from
        frames = frame(trace_dir)
        rows = {name: json.loads(df.to_json(orient="records")) for name, df in frames.items()}
        with open(out, "w") as f:
            json.dump(rows, f)
        return
    analysis = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(analysis.t.traces.keys())
    if report not in REPORTS:
        raise SystemExit(f"no HTA method for report {report}")
    frames = REPORTS[report](analysis, ranks)
    rows = {name: json.loads(df.to_json(orient="records")) for name, df in frames.items()}
    with open(out, "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main()
