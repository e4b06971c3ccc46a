"""Every error path of the Python API: the exception type and its message."""

import os

import re

import pytest

import opscope._C as _C
import opscope.profiler as profiler
from opscope.profiler import record_function


def finished_profile(**kwargs):
    with profiler.profile(**kwargs) as p:
        with record_function("work"):
            sum(range(20000))  # long enough for a whole microsecond in export_stacks
    return p


def test_start_twice():
    p = profiler.profile()
    p.start()
    try:
        with pytest.raises(RuntimeError, match="the profiler is already started; call stop\\(\\) first"):
            p.start()
    finally:
        p.stop()


def test_stop_and_step_without_start():
    p = profiler.profile()
    with pytest.raises(RuntimeError, match="the profiler is not started; call start\\(\\) first"):
        p.stop()
    with pytest.raises(RuntimeError, match="the profiler is not started; call start\\(\\) first"):
        p.step()


def test_two_sessions_at_once():
    with profiler.profile():
        other = profiler.profile()
        with pytest.raises(RuntimeError, match="is already recording in this process"):
            other.start()
    # Once the first stops, the second may start.
    with other:
        pass


def test_results_before_any_window():
    p = profiler.profile()
    for call in (p.events, p.key_averages, lambda: p.export_chrome_trace("x.json")):
        with pytest.raises(RuntimeError, match="no recording window has finished yet"):
            call()


def test_unknown_sort_key():
    p = finished_profile()
    with pytest.raises(ValueError, match='unknown sort_by "bogus"; valid keys are: .*self_cpu_time_total'):
        p.key_averages().table(sort_by="bogus")


def test_bad_column_width():
    p = finished_profile()
    with pytest.raises(ValueError, match="must be positive, got 0"):
        p.key_averages().table(max_name_column_width=0)


def test_negative_group_by_stack_n():
    p = finished_profile()
    with pytest.raises(ValueError, match="group_by_stack_n must be >= 0 .*got -1"):
        p.key_averages(group_by_stack_n=-1)


def test_export_stacks_unknown_metric(tmp_path):
    p = finished_profile(with_stack=True)
    with pytest.raises(
        ValueError,
        match="export_stacks: unknown metric 'cpu'; use self_cpu_time_total or self_cuda_time_total",
    ):
        p.export_stacks(str(tmp_path / "s.txt"), "cpu")


def test_export_stacks_without_with_stack(tmp_path):
    p = finished_profile()
    with pytest.raises(RuntimeError, match="recorded without with_stack"):
        p.export_stacks(str(tmp_path / "s.txt"))
    assert not (tmp_path / "s.txt").exists()


def test_export_stacks_writes_collapsed_lines(tmp_path):
    p = finished_profile(with_stack=True)
    p.export_stacks(str(tmp_path / "s.txt"))
    lines = (tmp_path / "s.txt").read_text().splitlines()
    assert lines, "ranges recorded with with_stack have stacks"
    for line in lines:
        frames, _, metric = line.rpartition(" ")
        assert frames and int(metric) >= 0


@pytest.mark.parametrize(
    "lenses, missing",
    [
        ({}, "record_shapes=True, profile_memory=True, with_stack=True"),
        ({"record_shapes": True}, "profile_memory=True, with_stack=True"),
        ({"record_shapes": True, "with_stack": True}, "profile_memory=True"),
    ],
)
def test_memory_timeline_needs_three_lenses(tmp_path, lenses, missing):
    p = finished_profile(**lenses)
    with pytest.raises(ValueError, match="^" + missing + " required for memory profiling.$"):
        p.export_memory_timeline(str(tmp_path / "m.json"))


def test_memory_timeline_unknown_suffix_and_device(tmp_path):
    p = finished_profile(record_shapes=True, profile_memory=True, with_stack=True)
    with pytest.raises(RuntimeError, match="cannot tell the format of"):
        p.export_memory_timeline(str(tmp_path / "m.txt"))
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        p.export_memory_timeline(str(tmp_path / "m.json"), device="tpu")
    p.export_memory_timeline(str(tmp_path / "m.json"))
    assert (tmp_path / "m.json").stat().st_size > 0


def test_invalid_json_metadata():
    p = profiler.profile()
    with pytest.raises(ValueError, match="add_metadata_json: the value for key 'k' is not valid JSON"):
        p.add_metadata_json("k", "{not json")
    with pytest.raises(ValueError, match="preset_metadata_json: the value for key 'k' is not valid JSON"):
        p.preset_metadata_json("k", "[1,")
    assert p.preset_metadata == {}


def test_export_to_an_unwritable_place(tmp_path):
    p = finished_profile()
    target = tmp_path / "no_such_dir" / "t.json"
    with pytest.raises(RuntimeError, match="cannot write .*no_such_dir"):
        p.export_chrome_trace(str(target))
    # The result is intact: it exports elsewhere.
    p.export_chrome_trace(str(tmp_path / "ok.json"))


def test_bad_schedule_return_value():
    p = profiler.profile(schedule=lambda step: "RECORD")
    with pytest.raises(TypeError, match="schedule must return a ProfilerAction, got 'RECORD'"):
        p.start()
    p.stop()
    p = profiler.profile(schedule=lambda step: 7)
    with pytest.raises(ValueError, match="schedule returned 7, which is not a ProfilerAction"):
        p.start()
    p.stop()


def test_schedule_exception_propagates():
    def schedule(step):
        if step == 2:
            raise ZeroDivisionError("from the schedule")
        return profiler.ProfilerAction.RECORD

    p = profiler.profile(schedule=schedule)
    p.start()
    p.step()
    with pytest.raises(ZeroDivisionError, match="from the schedule"):
        p.step()
    p.stop()


def test_on_trace_ready_exception_propagates_and_recording_goes_on():
    calls = []

    def on_trace_ready(prof):
        calls.append(prof.step_num)
        if len(calls) == 1:
            raise KeyError("handler failed")

    p = profiler.profile(
        schedule=profiler.schedule(wait=0, warmup=1, active=1), on_trace_ready=on_trace_ready
    )
    p.start()
    p.step()
    with pytest.raises(KeyError, match="handler failed"):
        p.step()
    p.step()
    p.step()
    p.stop()
    assert calls == [2, 4]


def test_wrong_argument_types():
    with pytest.raises(TypeError, match="schedule must be a callable"):
        profiler.profile(schedule=3)
    with pytest.raises(TypeError, match="on_trace_ready must be callable"):
        profiler.profile(on_trace_ready="print")
    with pytest.raises(TypeError, match="activities must hold ProfilerActivity values .*'cpu'"):
        profiler.profile(activities=["cpu"])
    with pytest.raises(TypeError, match="execution_trace_observer must be an opscope.profiler.ExecutionTraceObserver"):
        profiler.profile(execution_trace_observer=object())


def test_cuda_is_accepted_but_not_recorded(trace_of):
    reason = profiler.activity_unavailable_reason(profiler.ProfilerActivity.CUDA)
    assert reason  # no GPU backend yet, whatever the machine has
    assert profiler.ProfilerActivity.CUDA not in profiler.supported_activities()
    assert profiler.activity_unavailable_reason(profiler.ProfilerActivity.CPU) == ""
    with pytest.raises(TypeError, match="activity must be a ProfilerActivity"):
        profiler.activity_unavailable_reason("cuda")
    with pytest.warns(UserWarning, match=r"accepted but not recorded: cuda \(" + re.escape(reason)):
        with profiler.profile(
            activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.CUDA]
        ) as p:
            pass
    assert trace_of(p)["opscope_not_recorded"] == ["cuda"]


def test_record_function_entered_twice():
    rf = record_function("twice")
    with rf:
        with pytest.raises(ValueError, match="record_function\\('twice'\\) is already entered"):
            rf.__enter__()
    with rf:  # usable again once exited
        pass


def test_execution_trace_observer_errors(tmp_path):
    et = profiler.ExecutionTraceObserver()
    with pytest.raises(
        RuntimeError,
        match="A callback to the ET profiler needs to be registered first before getting the output file path",
    ):
        et.get_output_file_path()
    with pytest.raises(RuntimeError, match="no_such_dir"):
        et.register_callback(str(tmp_path / "no_such_dir" / "et.json"))
    assert not et.is_registered


def test_tensorboard_directory_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    handler = profiler.tensorboard_trace_handler(str(blocker / "log"))
    with pytest.raises(RuntimeError, match="^Can't create directory: " + str(blocker / "log") + "$"):
        with profiler.profile(on_trace_ready=handler):
            pass


def test_tensorboard_empty_dir_name():
    with pytest.raises(ValueError, match="dir_name is empty"):
        profiler.tensorboard_trace_handler("")


def test_distributed_info_must_be_json():
    with pytest.raises(ValueError, match="set_distributed_info: the value is not valid JSON"):
        _C.set_distributed_info("{")


def test_warnings_go_through_python_warnings():
    with pytest.warns(UserWarning, match="^a message from C\\+\\+$"):
        _C._warn("a message from C++")


def test_record_function_arguments():
    with pytest.raises(TypeError, match="record_function: name must be a string, got int"):
        record_function(3)
    with pytest.raises(TypeError, match="record_function: args must be a string or None, got list"):
        record_function("x", ["a"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'nme'"):
        record_function(nme="x")
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        record_function()
    rf = record_function(name="kw", args="a=1")
    assert (rf.name, rf.args) == ("kw", "a=1")
    assert repr(rf) == "record_function('kw')"
    assert record_function(**{"name": "via_dict"}).name == "via_dict"


def test_trace_with_a_time_past_the_rule(tmp_path):
    # The reader's rule for times (src/import/trace_times.h): the Python API refuses what the
    # CLI refuses, in its words, as RuntimeError (never a wrapped number, never a crash).
    event = '{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%s,"dur":1}'
    for value in ["9e21", "1e400", '"NaN"', "9223372036854775.807"]:
        path = tmp_path / "t.json"
        text = '{"traceEvents":[' + event % value + "]}"
        path.write_text(text)
        message = (
            f"cannot read trace {path}: \"ts\" {value} at byte {text.index(value)} is outside the "
            "times a trace may hold"
        )
        with pytest.raises(RuntimeError, match=re.escape(message) + ".*\\(in the event \"aten::mm\" that starts at byte 16\\)$"):
            _C.TraceFile(str(path))
    # At the bound: read.
    path.write_text('{"traceEvents":[' + event % "4611686018427386.903" + "]}")
    _C.TraceFile(str(path))
