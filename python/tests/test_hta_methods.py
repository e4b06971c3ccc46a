"""The HTA methods of python/opscope/_hta_methods.py against Holistic Trace Analysis itself.

HTA (../shared/peers/hta, unmodified) runs in this process on the same real traces (HTA's test
data in ../shared/peers/hta-tests and ../shared/peers/kineto-traces), with
HTA_DISABLE_NS_ROUNDING=1 as in test_analysis.py; each method's answer is compared with HTA's.
The figures of visualize=True are captured (plotly's Figure.show patched), not shown.
"""

import os
import sys

import pytest

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("OPSCOPE_SHARED_DIR") or os.path.join(HERE, "..", "..", "..", "shared")
TRACES = os.path.join(SHARED, "peers", "kineto-traces")
HTA_DIR = os.path.join(SHARED, "peers", "hta")
HTA_DATA = os.path.join(SHARED, "peers", "hta-tests", "tests", "data")


@pytest.fixture(scope="module")
def hta():
    """HTA's package, imported from ../shared/peers/hta."""
    if not os.path.isdir(HTA_DIR) or not os.path.isdir(HTA_DATA):
        pytest.skip(f"no HTA or its test data under {SHARED} (OPSCOPE_SHARED_DIR)")
    pytest.importorskip("plotly")
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    import logging

    logging.disable(logging.WARNING)
    sys.path.insert(0, HTA_DIR)
    import hta.trace_analysis
    import hta.trace_diff

    return hta


@pytest.fixture
def shown(monkeypatch):
    """The figures that fig.show() was asked to show, in order."""
    # Where plotly is not installed (the suite's Debian roots), the plotting tests cannot run.
    go = pytest.importorskip("plotly.graph_objects", reason="plotly is not installed")

    figures = []
    monkeypatch.setattr(go.Figure, "show", lambda fig, *a, **k: figures.append(fig))
    return figures


def both(hta, directory):
    from opscope.analysis import TraceAnalysis

    return hta.trace_analysis.TraceAnalysis(trace_dir=directory), TraceAnalysis(trace_dir=directory)


@pytest.fixture(scope="module")
def ns_job(hta):
    return both(hta, os.path.join(HTA_DATA, "ns_resolution_trace"))


def close(a, b):
    return abs(a - b) <= max(1e-6, 1e-9 * abs(a))


def test_user_annotation_breakdown_is_htas(ns_job, shown):
    theirs, ours = ns_job
    for gpu in (True, False):
        for kwargs in ({"num_kernels": 1000}, {"num_kernels": 5},
                       {"num_kernels": 5, "allowlist_patterns": ["Optimizer"]}):
            want = theirs.get_gpu_user_annotation_breakdown(use_gpu_annotation=gpu,
                                                            visualize=False, **kwargs)
            got = ours.get_gpu_user_annotation_breakdown(use_gpu_annotation=gpu,
                                                         visualize=False, **kwargs)
            what = f"gpu={gpu} {kwargs}"
            assert list(got.columns) == list(want.columns), what
            assert list(got["name"]) == list(want["name"]), what
            for column in ("sum (us)", "max (us)", "min (us)", "mean (us)", "stddev"):
                for w, g in zip(want[column], got[column]):
                    assert close(w, g), f"{what} {column}: HTA {w}, opscope {g}"
    assert shown == []
    drawn = ours.get_gpu_user_annotation_breakdown(visualize=True)
    # HTA's figures: a pie per rank, then a bar per annotation (its mean over the ranks).
    assert shown[0].layout.title.text == "User annotation distribution on each rank"
    assert list(shown[0].data[0].labels) == list(drawn["name"])
    assert [f.layout.title.text for f in shown[1:]] == [
        f"User annotation = {n}" for n in drawn["name"]]


def test_user_annotation_breakdown_is_none_without_annotations(hta):
    _, ours = both(hta, os.path.join(TRACES, "cupti_profiler"))
    assert ours.get_gpu_user_annotation_breakdown(visualize=False) is None


def test_gpu_kernels_with_user_annotations_are_htas(ns_job):
    theirs, ours = ns_job
    want = theirs.get_gpu_kernels_with_user_annotations(rank=0)
    got = ours.get_gpu_kernels_with_user_annotations(rank=0)
    assert len(got) == len(want)
    want = want.sort_values(["correlation", "ts"], kind="mergesort")
    got = got.sort_values(["correlation", "ts"], kind="mergesort")
    assert list(got["correlation"]) == list(want["correlation"])
    assert list(got["s_user_annotation"]) == list(want["s_user_annotation"])
    assert list(got["s_name"]) == list(want["s_name"])


def test_aten_op_kernels_and_delay_is_htas(hta, ns_job, shown):
    for theirs, ours in (ns_job, both(hta, os.path.join(HTA_DATA, "mtia_trace_single_rank"))):
        sort_by = ["occurrence_count", "avg_aten_op_launch_delay"]
        want = theirs.get_aten_op_kernels_and_delay(sort_by=sort_by)[0]
        shown.clear()
        got = ours.get_aten_op_kernels_and_delay(sort_by=sort_by)[0]
        assert len(shown) == 1 and type(shown[0].data[0]).__name__ == "Table"  # as HTA, always
        assert list(got.columns) == list(want.columns)
        # HTA lists an operator's kernels in the order of the trace file, which in the MTIA
        # trace runs backwards in time in places; opscope in launch order. So the sequences
        # are compared as sets of kernels, their delays where the sequence is one kernel.
        def by_kernels(df):
            kernels = df["kernel_sequence"].map(lambda s: " -> ".join(sorted(s.split(" -> "))))
            return df.assign(kernels=kernels).groupby(["aten_op_name", "kernels"])[
                "occurrence_count"].sum()
        pd.testing.assert_series_equal(by_kernels(got), by_kernels(want), check_dtype=False)
        single = lambda df: df[~df["kernel_sequence"].str.contains(" -> ")].sort_values(
            ["aten_op_name", "kernel_sequence"]).reset_index(drop=True)
        got, want = single(got), single(want)
        assert list(got["kernel_sequence"]) == list(want["kernel_sequence"])
        # HTA reads the timestamps (us since the epoch, about 1.7e15) as float64, whose step
        # there is 0.25 us; opscope keeps integer nanoseconds.
        for column in ("avg_aten_op_launch_delay", "avg_runtime_delay"):
            assert np.allclose(got[column], want[column], atol=0.25), column


def test_cupti_counters_are_htas(hta):
    theirs, ours = both(hta, os.path.join(TRACES, "cupti_profiler"))
    want = theirs.get_cupti_counter_data_with_operators()[0].sort_values("ts")
    got = ours.get_cupti_counter_data_with_operators()[0].sort_values("ts")
    assert len(got) == len(want) == 77
    counters = [c for c in want.columns if c.startswith("smsp__")]
    assert counters and set(counters) <= set(got.columns)
    for column in counters + ["name", "top_level_op", "bottom_level_op", "op_stack"]:
        assert list(got[column]) == list(want[column]), column


def test_profiler_steps_are_htas(hta):
    for name in ("trace_filter", "nccl_parser_config"):
        theirs, ours = both(hta, os.path.join(TRACES, name))
        assert ours.get_profiler_steps() == theirs.get_profiler_steps(), name


def test_potential_stragglers_are_htas(hta, shown):
    theirs, ours = both(hta, os.path.join(TRACES, "trace_filter"))
    for candidates in (1, 2):
        assert (ours.get_potential_stragglers(num_candidates=candidates)
                == theirs.get_potential_stragglers(num_candidates=candidates))
    ours.get_potential_stragglers(visualize=True)
    assert shown and shown[-1].layout.title.text == "Potential Stragglers"


def test_queue_length_summary_from_time_series_is_the_summary(hta):
    theirs, ours = both(hta, os.path.join(TRACES, "trace_filter"))
    got = ours.get_queue_length_summary_from_time_series(ours.get_queue_length_time_series())
    want = theirs.get_queue_length_summary_from_time_series(
        theirs.get_queue_length_time_series())
    assert list(got.index) == list(want.index)
    assert list(got.columns) == list(want.columns)
    assert np.allclose(got.to_numpy(float), want.to_numpy(float), equal_nan=True, rtol=1e-6)
    assert ours.get_queue_length_summary_from_time_series({}) is None


def test_idle_interval_stats_are_htas(hta):
    theirs, ours = both(hta, os.path.join(TRACES, "trace_filter"))
    want_idle, want = theirs.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)
    got_idle, got = ours.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)
    assert list(got.columns) == list(want.columns)
    assert got.index.name == want.index.name == "idle_category"
    want = want.reset_index().sort_values(["stream", "idle_category"], kind="mergesort")
    got = got.reset_index().sort_values(["stream", "idle_category"], kind="mergesort")
    assert list(got["idle_category"]) == list(want["idle_category"])
    assert list(got["stream"]) == list(want["stream"])
    # The counts of gaps per category follow from the idle split, which must agree first.
    split_agrees = np.allclose(
        got_idle.sort_values(["stream", "idle_category"])["idle_time"].to_numpy(),
        want_idle.sort_values(["stream", "idle_category"])["idle_time"].to_numpy(), rtol=0.005)
    if split_agrees:
        assert np.allclose(got[["count", "mean", "min", "max"]].to_numpy(float),
                           want[["count", "mean", "min", "max"]].to_numpy(float),
                           rtol=0.005, atol=0.011, equal_nan=True)
    assert ours.get_idle_time_breakdown(visualize=False)[1] is None


def test_trace_view_is_htas_frame(ns_job):
    theirs, ours = ns_job
    t, h = ours.t, theirs.t
    assert sorted(t.get_all_traces()) == sorted(h.get_all_traces())
    mine, hers = t.get_trace(0), h.get_trace(0)
    assert len(mine) == len(hers)
    for frame, table in ((mine, t.symbol_table), (hers, h.symbol_table)):
        frame = frame.copy()
        table.add_symbols_to_trace_df(frame, "name")
    counts = lambda f, st: f["name"].map(lambda i: st.sym_table[i]).value_counts().sort_index()
    pd.testing.assert_series_equal(counts(mine, t.symbol_table), counts(hers, h.symbol_table))


def test_labeled_trace_and_trace_diff_take_htas_labeled_trace(hta, shown):
    from opscope.analysis import LabeledTrace, TraceDiff

    base = os.path.join(HTA_DATA, "trace_compare", "base")
    test = os.path.join(HTA_DATA, "trace_compare", "test")
    HtaLabeled, HtaDiff = hta.trace_diff.LabeledTrace, hta.trace_diff.TraceDiff
    DeviceType = hta.trace_diff.DeviceType
    for make in (HtaLabeled, LabeledTrace):
        c, t = make(label="Base Trace", trace_dir=base), make(label="Test Trace", trace_dir=test)
        for device in (DeviceType.CPU, DeviceType.GPU, DeviceType.ALL):
            for short in (False, True):
                args = (c, t, 1, 1, 1010, 1010, device, short)
                want = HtaDiff.compare_traces(
                    HtaLabeled(label="Base Trace", trace_dir=base),
                    HtaLabeled(label="Test Trace", trace_dir=test), *args[2:])
                got = TraceDiff.compare_traces(*args)
                assert list(got.columns) == list(want.columns)  # named after the labels
                assert got.index.name == want.index.name
                assert sorted(got.index) == sorted(want.index)
                got = got.loc[want.index]
                assert list(got["counts_change_categories"]) == list(
                    want["counts_change_categories"])
                assert np.allclose(got["diff_duration"], want["diff_duration"])
        from opscope.analysis import DeviceType as OurDeviceType

        assert (TraceDiff.compare_traces(c, t, 1, 1, 1010, 1010, OurDeviceType.GPU).to_dict()
                == TraceDiff.compare_traces(c, t, 1, 1, 1010, 1010, DeviceType.GPU).to_dict())
        assert TraceDiff.ops_diff(c, t, 1, 1, 1010, 1010, DeviceType.CPU) == HtaDiff.ops_diff(
            HtaLabeled(label="B", trace_dir=base), HtaLabeled(label="T", trace_dir=test),
            1, 1, 1010, 1010, DeviceType.CPU)
    ours = LabeledTrace(label="Base Trace", trace_dir=base)
    theirs = HtaLabeled(label="Base Trace", trace_dir=base)
    assert ours.ranks() == theirs.ranks() and ours.iterations() == theirs.iterations()
    for device in (DeviceType.CPU, DeviceType.GPU):
        want = theirs.get_ops_summary(theirs.extract_ops(1, 1010, device))
        got = ours.get_ops_summary(ours.extract_ops(1, 1010, device))
        assert list(got.columns) == list(want.columns)
        key = lambda df: sorted(zip(df["name"], df["counts"], df["total_duration"]))
        assert key(got) == key(want)
    # The same label twice: HTA renames the test side.
    same = TraceDiff.compare_traces(LabeledTrace(label="x", trace_dir=base),
                                    LabeledTrace(label="x", trace_dir=test), 1, 1, 1010, 1010)
    assert "x_control_test_counts" in same.columns
    # HTA's figures of the diff.
    df = TraceDiff.compare_traces(ours, LabeledTrace(label="Test Trace", trace_dir=test),
                                  1, 1, 1010, 1010, DeviceType.CPU, True)
    assert TraceDiff.visualize_counts_diff(df) is None
    assert TraceDiff.visualize_duration_diff(df, show_image=True) is None
    assert [f.layout.title.text for f in shown] == ["Ops Count Comparison",
                                                     "Ops Duration Comparison"]
    assert [b.name for b in shown[0].data] == ["Base Trace", "Test Trace", "Difference"]
    assert list(shown[1].data[2].y) == list(df["diff_duration"])
    shown.clear()
    TraceDiff.visualize_counts_diff(df, show_image=False)
    assert shown == []


def test_every_visualize_draws(hta, shown):
    from opscope.analysis import TraceAnalysis

    ours = TraceAnalysis(trace_dir=os.path.join(TRACES, "trace_filter"))
    ours.get_comm_comp_overlap()
    assert shown[-1].layout.title.text == "Computation-Communication Overlap"
    shown.clear()
    kernel_type, kernels = ours.get_gpu_kernel_breakdown(image_renderer="json")
    titles = [f.layout.title.text for f in shown]
    # HTA's: the pie of the types, then per type a pie per rank and a bar per kernel.
    assert titles[0] == "Kernel Type Percentage Across All Ranks"
    shares = kernel_type[kernel_type["percentage"] > 0]
    assert list(shown[0].data[0].labels) == list(shares["kernel_type"])
    for ktype in kernels["kernel_type"].unique():
        assert f'Kernel type "{ktype}" - kernel distribution on each rank' in titles
    named = kernels[kernels["name"] != "others"]
    assert len(titles) == 1 + kernels["kernel_type"].nunique() + len(named.drop_duplicates(
        ["kernel_type", "name"]))
    shown.clear()
    launches = ours.get_cuda_kernel_launch_stats(visualize=True)
    assert len(shown) == 3 * len(launches)
    assert {type(d).__name__ for f in shown for d in f.data} == {"Histogram"}
    assert shown[0].layout.title.text.startswith("Short GPU kernels")
    shown.clear()
    ours.get_frequent_cuda_kernel_sequences("aten::linear", "/nonexistent", min_pattern_len=2,
                                            visualize=True)
    assert shown and shown[0].layout.title.text.startswith("Top 5 frequent patterns")


def test_no_hta_method_is_missing(hta):
    from opscope.analysis import TraceAnalysis, TraceDiff

    public = lambda cls: {n for n in dir(cls) if not n.startswith("_")}
    left_out = {"critical_path_analysis", "overlay_critical_path_analysis"}  # issue's other part
    missing = public(hta.trace_analysis.TraceAnalysis) - public(TraceAnalysis) - left_out
    assert missing == set()
    assert public(hta.trace_diff.TraceDiff) - public(TraceDiff) == set()


def test_a_job_table_method_without_hta_chart_draws_its_table(shown):
    # A report added to the catalog later gets its table as the figure, not an error.
    from opscope import _hta_methods

    df = pd.DataFrame({"rank": [0, 1], "value": [1.5, 2.5]})
    _hta_methods.draw_job_table("get_some_new_table", df)
    assert len(shown) == 1
    table = shown[0].data[0]
    assert type(table).__name__ == "Table"
    assert list(table.header.values) == ["rank", "value"]
    assert [list(c) for c in table.cells.values] == [[0, 1], [1.5, 2.5]]
    assert shown[0].layout.title.text == "get_some_new_table"
