#!/usr/bin/env python3
"""Runs Holistic Trace Analysis's TraceDiff (the unmodified package in ../shared/peers/hta) on
two trace directories and writes its tables as JSON rows, the oracle `opscope analyze diff` is
compared with (tests/unit/analyze_diff_test.cpp).

    hta_diff.py HTA_DIR CONTROL_DIR TEST_DIR OUT.json [--control-rank R] [--test-rank R]
                [--control-iteration N] [--test-iteration N] [--device cpu|gpu|all]
                [--short-names]

Ranks and iterations may be comma-separated lists, as opscope takes them. OUT.json holds
{"ops_diff": rows of compare_traces with the index as a column, "ops_summary": ops_diff's
lists as rows (category, name)}. Exit code 3 when HTA's dependencies are missing; HTA's own
failures (a ValueError for a bad rank or iteration) exit 4 with its message.
"""
import argparse
import json
import logging
import os
import sys


def int_list(text):
    values = [int(v) for v in text.split(",")]
    return values[0] if len(values) == 1 else values


def main():
    p = argparse.ArgumentParser()
    p.add_argument("hta_dir")
    p.add_argument("control")
    p.add_argument("test")
    p.add_argument("out")
    p.add_argument("--control-rank", type=int_list)
    p.add_argument("--test-rank", type=int_list)
    p.add_argument("--control-iteration", type=int_list)
    p.add_argument("--test-iteration", type=int_list)
    p.add_argument("--device", default="all", choices=["cpu", "gpu", "all"])
    p.add_argument("--short-names", action="store_true")
    a = p.parse_args()
    # With OPSCOPE_HTA_CACHE set (scripts/test), each build after the first reads HTA's answer
    # from there (hta_answers.py says what it is keyed by). The question: every option as
    # parsed; the folders are keyed by their files, the output path not at all.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hta_answers

    paths = ("hta_dir", "control", "test", "out")
    question = [f"{k}={v!r}" for k, v in sorted(vars(a).items()) if k not in paths]
    hta_answers.answer(__file__, a.hta_dir, [a.control, a.test], question, a.out, lambda: live(a))


def live(a):
    sys.path.insert(0, a.hta_dir)
    try:
        import pandas  # noqa: F401
        import plotly  # noqa: F401
    except ImportError as e:
        print(f"HTA needs {e.name}: run scripts/setup-deps", file=sys.stderr)
        sys.exit(3)
    logging.disable(logging.WARNING)
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    device = {"cpu": DeviceType.CPU, "gpu": DeviceType.GPU, "all": DeviceType.ALL}[a.device]
    try:
        # Each trace is loaded once and shared by both calls (a LabeledTrace is what both take).
        control = LabeledTrace("Control", trace_dir=a.control)
        test = LabeledTrace("Test", trace_dir=a.test)
        selection = (a.control_rank, a.test_rank, a.control_iteration, a.test_iteration, device)
        df = TraceDiff.compare_traces(control, test, *selection, a.short_names)
        lists = TraceDiff.ops_diff(control, test, *selection)
    except ValueError as e:
        print(f"HTA: {e}", file=sys.stderr)
        sys.exit(4)
    rows = json.loads(df.reset_index().to_json(orient="records"))
    summary = [{"category": c, "name": n} for c, names in lists.items() for n in names]
    with open(a.out, "w") as f:
        json.dump({"ops_diff": rows, "ops_summary": summary}, f)


if __name__ == "__main__":
    main()
