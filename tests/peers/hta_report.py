#!/usr/bin/env python3
"""Runs Holistic Trace Analysis (the unmodified package in ../shared/peers/hta) on a trace
directory and writes one report's DataFrame as JSON rows, the oracle `opscope analyze` is
compared with (tests/unit/analyze_test.cpp).

    hta_report.py HTA_DIR TRACE_DIR REPORT OUT.json

REPORT is an opscope report name. Exit code 3 when HTA's dependencies are missing (pandas,
plotly, ...: scripts/setup-deps installs them); HTA's own failures propagate.
"""
import json
import logging
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


# opscope report name -> a function of (TraceAnalysis, its sorted ranks) giving
# {table name: DataFrame}, the tables `opscope analyze --report NAME --format json` prints.
REPORTS = {
    "temporal": temporal,
    "kernels": kernels,
    "overlap": overlap,
    "idle": idle,
}


def main():
    hta_dir, trace_dir, report, out = sys.argv[1:5]
    sys.path.insert(0, hta_dir)
    try:
        import pandas  # noqa: F401
        import plotly  # noqa: F401
    except ImportError as e:
        print(f"HTA needs {e.name}: run scripts/setup-deps", file=sys.stderr)
        sys.exit(3)
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

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
