"""opscope's critical path analysis against HTA's own, on every critical-path trace of HTA's tests.

HTA (../shared/peers/hta, unmodified) runs in a subprocess: its environment options
(CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE, HTA_DISABLE_NS_ROUNDING) are a singleton read once
per process, and HTA's tests set the first. Both sides keep nanoseconds
(HTA_DISABLE_NS_ROUNDING=1). For each trace and the annotation and instance HTA's tests use,
the graphs must have the same number of nodes and edges, the same edge types with the same
weights, the same critical path length and the same summary by bound type; the overlaid trace
must mark as many events critical as the path holds.
"""

import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter

import pytest

pd = pytest.importorskip("pandas")
nx = pytest.importorskip("networkx")

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("OPSCOPE_SHARED_DIR") or os.path.join(HERE, "..", "..", "..", "shared")
HTA_DIR = os.path.join(SHARED, "peers", "hta")
DATA = os.path.join(SHARED, "peers", "hta-tests", "tests", "data")

# (trace directory under HTA's test data, annotation, instance_id, data_load_events), as in
# hta-tests/tests/test_critical_path_analysis.py.
CASES = [
    ("critical_path/simple_add", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1, None),
    ("critical_path/alexnet", "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1, None),
    ("critical_path/cuda_event_sync", "ProfilerStep", 0, None),
    ("critical_path/cuda_event_sync_multi_stream", "", None, None),
    ("critical_path/end_to_end/simple_add/input", "", 0, ["data_load"]),
    ("ns_resolution_trace", "ProfilerStep", 1, None),
    ("amd_trace", "ProfilerStep", 1, None),
]

# What the subprocess prints for each case: a JSON object of the graph's figures.
STATS = r'''
def stats(g, ok):
    edges = [g.edges[u, v]["object"] for u, v in g.edges]
    weights = {}
    for e in edges:
        weights.setdefault(e.type.value, []).append(float(e.weight))
    return {
        "ok": bool(ok),
        "nodes": len(g.nodes),
        "edges": len(edges),
        "node_list": len(g.node_list),
        "weights": {k: sorted(v) for k, v in weights.items()},
        "length": float(sum(e.weight for e in g.critical_path_edges_set)),
        "path_nodes": len(g.critical_path_nodes),
        "path_events": len(g.critical_path_events_set),
        "summary": {k: float(v) for k, v in g.summary().items()},
    }
'''

HTA_SCRIPT = STATS + r'''
import json, logging, os, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
out = []
for d, a, i, dl in json.loads(sys.argv[1]):
    t = TraceAnalysis(trace_dir=os.path.join(sys.argv[2], d))
    g, ok = t.critical_path_analysis(rank=0, annotation=a, instance_id=i, data_load_events=dl)
    out.append(stats(g, ok))
print("STATS" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def hta_stats():
    if not os.path.isdir(HTA_DIR) or not os.path.isdir(DATA):
        pytest.skip(f"no HTA or its test data under {SHARED} (OPSCOPE_SHARED_DIR)")
    pytest.importorskip("plotly")  # HTA imports it
    env = dict(
        os.environ,
        PYTHONPATH=HTA_DIR,
        CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE="1",
        HTA_DISABLE_NS_ROUNDING="1",
    )
    proc = subprocess.run(
        [sys.executable, "-c", HTA_SCRIPT, json.dumps(CASES), DATA],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("STATS")][-1]
    return json.loads(line[len("STATS"):])


@pytest.fixture
def zero_weight_edges(monkeypatch):
    monkeypatch.setenv("CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE", "1")
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_same_graph_and_path_as_hta(case, hta_stats, zero_weight_edges, capsys):
    from opscope.analysis import TraceAnalysis

    d, annotation, instance, data_load = CASES[case]
    namespace = {}
    exec(STATS, namespace)
    t = TraceAnalysis(trace_dir=os.path.join(DATA, d))
    g, ok = t.critical_path_analysis(
        rank=0, annotation=annotation, instance_id=instance, data_load_events=data_load
    )
    got, want = namespace["stats"](g, ok), hta_stats[case]
    assert got["ok"] and want["ok"]
    for key in ("nodes", "edges", "node_list", "path_nodes", "path_events"):
        assert got[key] == want[key], f"{d}: {key}"
    # HTA parses "ts" into float64 microseconds since the epoch: at 1.7e15 us (the ns trace)
    # their spacing is 0.25 us, so its times are off by up to that much and a difference of
    # two by twice it (its negative spans of nested ns events come from there); opscope keeps
    # the text's nanoseconds. Weights agree within four spacings of the trace's largest time
    # (and 0.002 us), sums within a millionth.
    largest = max(abs(n.ts) for n in g.node_list)
    spacing = 2.0 ** (math.floor(math.log2(largest)) - 52) if largest else 0.0
    tolerance = max(2e-3, 4 * spacing)
    assert sorted(got["weights"]) == sorted(want["weights"]), d
    for etype, ws in want["weights"].items():
        assert len(got["weights"][etype]) == len(ws), f"{d}: {etype}"
        for a, b in zip(got["weights"][etype], ws):
            assert abs(a - b) <= tolerance, f"{d}: {etype} weight {a} against HTA's {b}"
    assert got["length"] == pytest.approx(want["length"], rel=1e-6), d
    assert sorted(got["summary"]) == sorted(want["summary"]), d
    for k, v in want["summary"].items():
        assert got["summary"][k] == pytest.approx(v, abs=1e-3), f"{d}: summary {k}"


def test_overlaid_trace_marks_the_path(zero_weight_edges):
    from opscope.analysis import CPEdgeType, TraceAnalysis

    if not os.path.isdir(DATA):
        pytest.skip(f"no HTA test data under {SHARED}")
    d, annotation, instance, _ = CASES[0]
    t = TraceAnalysis(trace_dir=os.path.join(DATA, d))
    g, ok = t.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    assert ok
    with tempfile.TemporaryDirectory() as tmp:
        path = t.overlay_critical_path_analysis(
            0, g, output_dir=tmp, only_show_critical_events=False, show_all_edges=True
        )
        assert os.path.basename(path).startswith("overlaid_critical_path_")
        with gzip.open(path) as f:
            events = json.load(f)["traceEvents"]
    marked = sum(e["args"].get("critical", 0) for e in events if e["ph"] == "X")
    assert marked == len(g.critical_path_events_set)
    flows = Counter(e["args"]["type"] for e in events if e["ph"] in ("s", "f"))
    edges = Counter(
        g.edges[u, v]["object"].type for u, v in g.edges
        if not (g.edges[u, v]["object"].type == CPEdgeType.KERNEL_LAUNCH_DELAY
                and g.edges[u, v]["object"].weight == 0)
    )
    for etype in CPEdgeType:
        assert flows[etype.value] == 2 * edges[etype]
    assert sum(e["args"]["critical"] for e in events if e["ph"] == "f") == len(
        g.critical_path_edges_set
    )


def test_missing_annotation_is_none():
    from opscope.analysis import TraceAnalysis

    if not os.path.isdir(DATA):
        pytest.skip(f"no HTA test data under {SHARED}")
    t = TraceAnalysis(trace_dir=os.path.join(DATA, CASES[0][0]))
    assert t.critical_path_analysis(rank=0, annotation="no such annotation", instance_id=0) is None


def test_save_and_restore(zero_weight_edges, tmp_path):
    from opscope.analysis import TraceAnalysis, restore_cpgraph

    if not os.path.isdir(DATA):
        pytest.skip(f"no HTA test data under {SHARED}")
    d, annotation, instance, _ = CASES[1]
    t = TraceAnalysis(trace_dir=os.path.join(DATA, d))
    g, ok = t.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    summary = g.summary()
    zip_file = g.save(out_dir=str(tmp_path / "saved_cp_graph"))
    r = restore_cpgraph(zip_filename=zip_file, t_full=t.t, rank=0)
    assert (len(r.nodes), len(r.edges)) == (len(g.nodes), len(g.edges))
    pd.testing.assert_series_equal(r.summary(), summary)
    # networkx's own longest path over the restored graph finds the engine's path.
    assert r.critical_path()
    assert r.critical_path_nodes == g.critical_path_nodes


def test_without_networkx_the_rest_imports_and_critical_path_says_what_to_install():
    # networkx made unimportable in a child process: opscope.analysis still imports, and the
    # critical path call raises ImportError naming the package (not a NameError).
    code = (
        "import sys; sys.modules['networkx'] = None\n"
        "import opscope.analysis as A\n"
        "assert 'CPGraph' not in A.__all__ and 'TraceAnalysis' in A.__all__, A.__all__\n"
        "a = A.TraceAnalysis(trace_dir=sys.argv[1])\n"
        "try:\n"
        "    a.critical_path_analysis(rank=0, annotation='', instance_id=None)\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    folder = os.path.join(DATA, "critical_path", "alexnet")
    if not os.path.isdir(folder):
        pytest.skip(f"HTA's test data is not at {folder}")
    run = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True,
                         env=dict(os.environ), check=False)
    assert run.returncode == 0, run.stderr
    assert "install python3-networkx" in run.stdout
