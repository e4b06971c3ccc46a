"""What the lenses add, seen from Python: stacks in tables and files, input shapes, the
execution trace given to a profile."""

import json

import pytest

import opscope.profiler as profiler
from opscope.profiler import RecordFunctionFast, record_function

from conftest import complete_events


def site_a():
    with record_function("op"):
        # Some microseconds of work: export_stacks leaves out stacks whose self time rounds
        # to 0 us.
        sum(range(3000))


def site_b():
    with record_function("op"):
        pass


def test_group_by_stack_n_splits_rows_by_call_site():
    with profiler.profile(with_stack=True) as p:
        site_a()
        site_b()
        site_b()
    rows = [row for row in p.key_averages(group_by_stack_n=1) if row.key == "op"]
    by_site = {row.stack[0].split(": ")[-1]: row.count for row in rows}
    assert by_site == {"site_a": 1, "site_b": 2}
    # Without grouping by stack, one row.
    assert [row.count for row in p.key_averages() if row.key == "op"] == [3]
    table = p.key_averages(group_by_stack_n=1).table(sort_by="count")
    assert "Source Location" in table and "site_b" in table


def test_stacks_in_events_trace_and_stack_file(tmp_path, trace_of):
    with profiler.profile(with_stack=True) as p:
        site_a()
    (op,) = [e for e in p.events() if e.name == "op"]
    assert op.stack[0].endswith(": site_a") and "test_lenses.py(" in op.stack[0]
    (traced,) = complete_events(trace_of(p), "op")
    assert any("site_a" in frame for frame in traced["args"]["Call stack"].split(";"))
    p.export_stacks(str(tmp_path / "stacks.txt"))
    lines = (tmp_path / "stacks.txt").read_text().splitlines()
    # Root first, the range itself as the leaf: "...;test_lenses.py(15):_site_a;op <us>"
    # (spaces inside a frame become "_").
    assert any(line.rpartition(" ")[0].endswith("_site_a;op") for line in lines), lines


def test_group_by_input_shape_splits_rows():
    with profiler.profile(record_shapes=True) as p:
        with RecordFunctionFast("fast", [1]):
            pass
        with RecordFunctionFast("fast", [1, 2]):
            pass
        with RecordFunctionFast("fast", [3, 4]):
            pass
    rows = {str(row.input_shapes): row.count for row in p.key_averages(group_by_input_shape=True) if row.key == "fast"}
    assert rows == {"[[]]": 1, "[[], []]": 2}
    table = p.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in table


def test_execution_trace_observer_records_the_windows(tmp_path):
    path = tmp_path / "et.json"
    et = profiler.ExecutionTraceObserver().register_callback(str(path))
    assert et.is_registered and et.get_output_file_path() == str(path)
    with profiler.profile(
        schedule=profiler.schedule(wait=1, warmup=1, active=1),
        execution_trace_observer=et,
    ) as p:
        for step in range(3):
            with record_function(f"et_step_{step}"):
                pass
            p.step()
    # The profile cleaned the observer up on exit: the file is complete.
    assert not et.is_registered
    nodes = json.loads(path.read_text())["nodes"]
    names = {n["name"] for n in nodes}
    # Only the recorded window (step 2) is in the execution trace.
    assert "et_step_2" in names
    assert not names & {"et_step_0", "et_step_1"}


def test_with_modules_and_flops_are_accepted_and_marked(trace_of):
    with profiler.profile(with_modules=True, with_flops=True, profile_memory=True) as p:
        with record_function("x"):
            pass
    trace = trace_of(p)
    assert trace["with_modules"] == 1 and trace["with_flops"] == 1 and trace["profile_memory"] == 1
    assert "with_stack" not in trace
