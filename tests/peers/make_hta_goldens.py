#!/usr/bin/env python3
"""Records Holistic Trace Analysis's reports on traces too large to run HTA on in every test run:
longer runs of the real jobs in ../shared/peers/kineto-traces (tests/peers/longer_trace.py),
each report's tables kept under tests/golden/hta/ with the HTA version that made them.
tests/unit/analyze_golden_test.cpp makes the same longer traces again and compares opscope's
reports with these.

    /usr/bin/python3 tests/peers/make_hta_goldens.py [--shared ../shared]

Run it again when HTA in ../shared/peers changes (it takes a few minutes: HTA reads each longer
job once per report).
"""
import argparse
import gzip
import json
import logging
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import longer_trace  # noqa: E402

# (golden name, trace directory under kineto-traces, copies, reports). trace_filter: two A100
# ranks with NCCL; nccl_parser_config: float timestamps, the largest real trace. The reports are
# those whose whole tables HTA computes within a minute on these (patterns rebuilds HTA's call
# graph per call, minutes at this size; it is compared live on the real traces instead).
JOBS = [
    ("trace_filter_x8", "trace_filter", 8,
     ["temporal", "idle", "kernels", "overlap", "launch", "queue"]),
    ("nccl_parser_config_x4", "nccl_parser_config", 4,
     ["temporal", "idle", "kernels", "overlap", "launch", "queue"]),
]


def hta_version(hta_dir, shared):
    """HTA's version and the commit ../shared/peers/README.md names."""
    version = "unknown"
    with open(os.path.join(hta_dir, "hta", "version.py")) as f:
        m = re.search(r"__version__\s*=\s*[\"']([^\"']+)", f.read())
        if m:
            version = m.group(1)
    commit = "unknown"
    readme = os.path.join(shared, "peers", "README.md")
    if os.path.exists(readme):
        with open(readme) as f:
            m = re.search(r"HolisticTraceAnalysis\), commit ([0-9a-f]+)", f.read())
            if m:
                commit = m.group(1)
    return f"hta {version}, commit {commit}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    a = p.parse_args()
    hta_dir = os.path.join(a.shared, "peers", "hta")
    traces = os.path.join(a.shared, "peers", "kineto-traces")
    # Nanoseconds kept, as in the live comparisons (tests/support/hta_oracle.h says why).
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    sys.path.insert(0, hta_dir)
    logging.disable(logging.WARNING)
    import hta_report
    from hta.trace_analysis import TraceAnalysis

    out_dir = os.path.join(ROOT, "tests", "golden", "hta")
    os.makedirs(out_dir, exist_ok=True)
    made_by = hta_version(hta_dir, a.shared)
    for name, source, copies, reports in JOBS:
        with tempfile.TemporaryDirectory() as work:
            job = os.path.join(work, name)
            longer_trace.longer_trace(os.path.join(traces, source), job, copies)
            analysis = TraceAnalysis(trace_dir=job)
            ranks = sorted(analysis.t.traces.keys())
            tables = {}
            for report in reports:
                print(f"{name}: {report}", file=sys.stderr)
                frames = hta_report.REPORTS[report](analysis, ranks)
                tables[report] = {t: json.loads(df.to_json(orient="records"))
                                  for t, df in frames.items()}
        golden = {"made_by": made_by, "source": source, "copies": copies,
                  "generator": "tests/peers/longer_trace.py", "reports": tables}
        path = os.path.join(out_dir, name + ".json.gz")
        # mtime=0: the same tables give the same bytes.
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps(golden, sort_keys=True).encode())
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
