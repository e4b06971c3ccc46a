"""Tables, traces and events from Python workloads whose structure is known."""

import json
import os
import re
import threading

import pytest

import opscope.profiler as profiler
from opscope.profiler import record_function

from conftest import complete_events, encloses


def nested_workload(outer_calls, inner_per_outer):
    for _ in range(outer_calls):
        with record_function("outer"):
            for _ in range(inner_per_outer):
                with record_function("inner"):
                    sum(range(200))


def test_nested_ranges_in_the_chrome_trace(trace_of):
    with profiler.profile() as p:
        nested_workload(3, 4)
    trace = trace_of(p)
    outers = complete_events(trace, "outer")
    inners = complete_events(trace, "inner")
    assert len(outers) == 3 and len(inners) == 12
    me = threading.get_native_id()
    assert {e["tid"] for e in outers + inners} == {me}
    assert {e["cat"] for e in outers + inners} == {"user_annotation"}
    # Every inner range lies inside exactly one outer range, four per outer.
    for outer in outers:
        assert sum(encloses(outer, inner) for inner in inners) == 4
    for inner in inners:
        assert sum(encloses(outer, inner) for outer in outers) == 1
    assert trace["schemaVersion"] == 1


def test_the_step_ranges_hold_the_work(trace_of):
    with profiler.profile(schedule=lambda step: profiler.ProfilerAction.RECORD) as p:
        for _ in range(2):
            nested_workload(1, 2)
            p.step()
    trace = trace_of(p)
    steps = {e["name"]: e for e in complete_events(trace) if e["name"].startswith("ProfilerStep#")}
    assert sorted(steps) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    outers = complete_events(trace, "outer")
    assert encloses(steps["ProfilerStep#0"], outers[0])
    assert encloses(steps["ProfilerStep#1"], outers[1])


def test_key_averages_counts_and_times():
    with profiler.profile() as p:
        nested_workload(5, 3)
    averages = {row.key: row for row in p.key_averages()}
    assert averages["outer"].count == 5
    assert averages["inner"].count == 15
    outer, inner = averages["outer"], averages["inner"]
    # The outer ranges hold the inner ones: their total covers the inner total, and their
    # self time is what is left.
    assert outer.cpu_time_total >= inner.cpu_time_total
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - inner.cpu_time_total, abs=0.01
    )
    assert inner.self_cpu_time_total == pytest.approx(inner.cpu_time_total, abs=0.01)
    assert outer.cpu_time == pytest.approx(outer.cpu_time_total / 5)


def table_rows(table):
    """{name: [columns]} of a rendered table's data rows."""
    rows = {}
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) > 3 and not line.startswith("-") and cells[0] != "Name":
            rows[cells[0]] = cells
    return rows


def test_table_rows_and_sorting():
    with profiler.profile() as p:
        nested_workload(2, 5)
    table = p.key_averages().table(sort_by="count", row_limit=10)
    header = next(line for line in table.splitlines() if line.strip().startswith("Name"))
    assert "Self CPU %" in header and "# of Calls" in header
    rows = table_rows(table)
    assert rows["inner"][-1] == "10" and rows["outer"][-1] == "2"
    # Descending by count: inner (10) before outer (2).
    assert table.index("inner") < table.index("outer")
    assert "Self CPU time total:" in table
    limited = p.key_averages().table(sort_by="count", row_limit=1)
    assert "inner" in limited and "outer" not in table_rows(limited)


def test_events_tree_matches_the_workload():
    with profiler.profile() as p:
        nested_workload(2, 3)
    events = p.events()
    outers = [e for e in events if e.name == "outer"]
    assert len(outers) == 2
    for outer in outers:
        children = outer.cpu_children
        assert [c.name for c in children] == ["inner"] * 3
        assert all(c.cpu_parent == outer for c in children)
        assert outer.thread == threading.get_native_id()
        assert outer.scope_name == "USER_SCOPE" and outer.is_user_annotation
        assert outer.kind == "range" and not outer.is_async
        assert 0 <= outer.start_us <= outer.end_us
        assert outer.cpu_time_total == pytest.approx(outer.end_us - outer.start_us, abs=0.01)
        assert outer.self_cpu_time_total <= outer.cpu_time_total
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids), "range ids are unique"
    assert len(events) == sum(1 for _ in events)
    assert events[-1] == events[len(events) - 1]
    with pytest.raises(IndexError):
        events[len(events)]


def test_events_survive_the_next_window():
    p = profiler.profile(schedule=profiler.schedule(wait=0, warmup=1, active=1))
    p.start()
    p.step()
    with record_function("first_window"):
        pass
    p.step()  # RECORD_AND_SAVE -> WARMUP: the first window is the result
    first = p.events()
    p.step()
    with record_function("second_window"):
        pass
    p.stop()
    assert "first_window" in {e.name for e in first}
    assert "second_window" in {e.name for e in p.events()}
    assert "second_window" not in {e.name for e in first}


def test_record_function_args_are_recorded_with_record_shapes():
    with profiler.profile(record_shapes=True) as p:
        with record_function("with_args", "lr=0.1"):
            pass
        with record_function("without_args"):
            pass
    by_name = {e.name: e for e in p.events()}
    assert by_name["with_args"].concrete_inputs == ["lr=0.1"]
    assert by_name["without_args"].concrete_inputs == []


def test_record_function_args_are_ignored_without_record_shapes():
    with profiler.profile() as p:
        with record_function("with_args", "lr=0.1"):
            pass
    assert [e.concrete_inputs for e in p.events() if e.name == "with_args"] == [[]]


def test_record_function_as_decorator():
    @record_function("decorated")
    def work(x, y=1):
        return x + y

    with profiler.profile() as p:
        assert work(1) == 2
        assert work(2, y=3) == 5
    assert work.__name__ == "work"
    assert [e.name for e in p.events()].count("decorated") == 2


def test_record_function_outside_a_session_records_nothing():
    with record_function("before"):
        pass
    with profiler.profile() as p:
        with record_function("during"):
            pass
    with record_function("after"):
        pass
    names = {e.name for e in p.events()}
    assert "during" in names and not names & {"before", "after"}


def test_record_function_ends_on_exception():
    with profiler.profile() as p:
        with pytest.raises(KeyError):
            with record_function("failing"):
                raise KeyError("x")
        with record_function("next"):
            pass
    by_name = {e.name: e for e in p.events()}
    # The failing range was closed: "next" sits beside it, at the top (no schedule, so no
    # step range).
    assert by_name["next"].cpu_parent is None and by_name["failing"].cpu_parent is None
    assert by_name["failing"].end_ns <= by_name["next"].start_ns


def test_metadata_in_the_trace(trace_of):
    p = profiler.profile(record_shapes=True)
    p.preset_metadata_json("preset", '{"run": 7}')
    with p:
        p.add_metadata("note", 'say "hi" \\ bye')
        p.add_metadata_json("config", '{"lr": 0.5, "layers": [1, 2]}')
    trace = trace_of(p)
    assert trace["note"] == 'say "hi" \\ bye'
    assert trace["config"] == {"lr": 0.5, "layers": [1, 2]}
    assert trace["preset"] == {"run": 7}
    assert trace["record_shapes"] == 1
    assert "with_stack" not in trace
    assert p.preset_metadata == {"preset": '{"run": 7}'}


def test_preset_metadata_reaches_every_window(tmp_path):
    p = profiler.profile(
        schedule=profiler.schedule(wait=0, warmup=1, active=1, repeat=2),
        on_trace_ready=profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w"),
    )
    p.preset_metadata_json("run_id", '"abc"')
    with p:
        p.add_metadata("only_first", "1")
        for _ in range(4):
            p.step()
    from conftest import load_trace

    traces = [load_trace(tmp_path / f) for f in sorted(os.listdir(tmp_path))]
    assert len(traces) == 2
    assert [t.get("run_id") for t in traces] == ["abc", "abc"]
    assert [t.get("only_first") for t in traces] == ["1", None]


def test_stats():
    p = profiler.profile()
    assert p._stats() is None
    with p:
        nested_workload(1, 3)
    stats = p._stats()
    assert stats["events_recorded"] >= 4 and stats["events_dropped"] == 0
    assert stats["ranges_open_at_stop"] == 0


def test_a_range_open_at_stop_is_counted(tmp_path):
    from conftest import load_trace

    with profiler.profile() as p:
        nested_workload(1, 2)
        still_open = profiler.record_function("open_at_stop")
        still_open.__enter__()
    still_open.__exit__(None, None, None)
    assert p._stats()["ranges_open_at_stop"] == 1
    p.export_chrome_trace(str(tmp_path / "t.json"))
    trace = load_trace(tmp_path / "t.json")
    assert trace["opscope"]["ranges_open_at_stop"] == 1
    assert all(e.get("name") != "open_at_stop" for e in trace["traceEvents"])


def test_chrome_trace_gz(tmp_path):
    from conftest import load_trace

    with profiler.profile() as p:
        nested_workload(1, 2)
    p.export_chrome_trace(str(tmp_path / "t.json.gz"))
    with open(tmp_path / "t.json.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b", "gzip magic"
    trace = load_trace(tmp_path / "t.json.gz")
    assert len(complete_events(trace, "inner")) == 2


def test_record_function_ended_by_garbage_collection():
    # A range entered but never exited ends when its object goes away, not never.
    with profiler.profile() as p:
        rf = record_function("abandoned")
        rf.__enter__()
        del rf
        with record_function("after"):
            pass
    by_name = {e.name: e for e in p.events()}
    assert by_name["abandoned"].end_ns <= by_name["after"].start_ns
