"""The Python API in Python's words: errors name the Python call (never C++'s `::`), wrong
argument types say which parameter and which types, a missing pandas says what to install,
and warnings point at the caller's line."""

import os
import subprocess
import sys
import textwrap

import pytest

import opscope.profiler as profiler
from opscope.profiler import record_function

# Runs `code` in a fresh interpreter whose imports of the modules in `blocked` fail as a
# missing module's do; returns the completed process.
_BLOCKER = textwrap.dedent(
    """
    import sys

    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)",
                                          name=name)
            return None

    sys.meta_path.insert(0, _Block())
    """
)


def run_without(blocked, code):
    script = f"BLOCKED = {tuple(blocked)!r}\n" + _BLOCKER + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_analysis_without_pandas_says_what_to_install():
    r = run_without(["pandas"], """
        import opscope
        import opscope.profiler  # profiling does not need pandas
        try:
            import opscope.analysis
        except ImportError as e:
            print(type(e).__name__, e.name, "|", e)
        else:
            print("imported")
    """)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip()
    assert out.startswith("ImportError pandas | opscope.analysis needs pandas"), out
    assert "apt-get install python3-pandas" in out and "pip install pandas" in out, out
    assert "blocked by the test" in out, out  # the cause is kept in the message


def test_attribute_access_without_pandas_says_the_same():
    r = run_without(["pandas"], """
        import opscope
        try:
            opscope.analysis
        except ImportError as e:
            print(e)
    """)
    assert r.returncode == 0, r.stderr
    assert "python3-pandas" in r.stdout, r.stdout


# --- Errors name the Python call ------------------------------------------------------------


def _error_of(call):
    with pytest.raises(Exception) as info:
        call()
    return info.type, str(info.value)


def test_results_before_a_window_name_the_method_called(tmp_path):
    p = profiler.profile()
    calls = {
        "events": p.events,
        "key_averages": p.key_averages,
        "export_chrome_trace": lambda: p.export_chrome_trace(str(tmp_path / "t.json")),
        "export_stacks": lambda: p.export_stacks(str(tmp_path / "s.txt")),
    }
    for name, call in calls.items():
        kind, message = _error_of(call)
        assert kind is RuntimeError
        expected = f"profile.{name}(): no recording window has finished yet"
        assert message.startswith(expected), message
        assert "::" not in message, message


def test_start_stop_step_misuse_names_the_python_call():
    p = profiler.profile()
    for name, expected in (("stop", "the profiler is not started; call start() first"),
                           ("step", "the profiler is not started; call start() first")):
        kind, message = _error_of(getattr(p, name))
        assert (kind, message) == (RuntimeError, f"profile.{name}(): {expected}")
    p.start()
    try:
        kind, message = _error_of(p.start)
        assert (kind, message) == (
            RuntimeError, "profile.start(): the profiler is already started; call stop() first")
        other = profiler.profile()
        kind, message = _error_of(other.start)
        assert kind is RuntimeError
        assert message == (
            "profile.start(): an opscope.profiler.profile is already recording in this process, "
            "and opscope records one session at a time; stop it first")
    finally:
        p.stop()


def test_execution_trace_observer_misuse_has_no_cpp_names(tmp_path):
    first = profiler.ExecutionTraceObserver().register_callback(str(tmp_path / "a.json"))
    try:
        kind, message = _error_of(
            lambda: profiler.ExecutionTraceObserver().register_callback(str(tmp_path / "b.json")))
        assert kind is RuntimeError
        assert "another ExecutionTraceObserver is already registered" in message
        assert "::" not in message, message
        with pytest.warns(UserWarning) as caught:
            first.register_callback(str(tmp_path / "c.json"))
        assert "already registered" in str(caught[0].message)
        assert "::" not in str(caught[0].message)
    finally:
        first.unregister_callback()
    with pytest.warns(UserWarning) as caught:
        profiler.ExecutionTraceObserver().start()
    assert "not registered" in str(caught[0].message) and "::" not in str(caught[0].message)


def test_unrecorded_activity_warning_has_no_cpp_names():
    if profiler.ProfilerActivity.CUDA in profiler.supported_activities():
        pytest.skip("CUDA is recorded here")
    with pytest.warns(UserWarning, match="accepted but not recorded") as caught:
        with profiler.profile(activities=[profiler.ProfilerActivity.CPU,
                                          profiler.ProfilerActivity.CUDA]):
            pass
    for w in caught:
        assert "::" not in str(w.message), w.message


# --- Warnings point at the caller's line --------------------------------------------------------

import inspect  # noqa: E402
import logging  # noqa: E402
import warnings  # noqa: E402

import opscope._C as _C  # noqa: E402


def _assert_at_caller(caught, needle):
    hits = [w for w in caught if needle in str(w.message)]
    assert hits, [str(w.message) for w in caught]
    for w in hits:
        assert w.filename == __file__, (w.filename, str(w.message))


def test_cpp_warning_from_schedule_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        profiler.schedule(wait=1, warmup=0, active=1)
    _assert_at_caller(caught, "won't be using warmup")
    assert [w.lineno for w in caught if "warmup" in str(w.message)] == [line]


def test_on_trace_ready_never_called_points_at_the_with_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profiler.profile(schedule=profiler.schedule(wait=5, warmup=1, active=1),
                              on_trace_ready=lambda p: None) as p:
            p.step()
        line = inspect.currentframe().f_lineno - 3  # the `with` statement
    _assert_at_caller(caught, "on_trace_ready was never called")
    # The warning is raised at the with statement's exit: Python reports the line of `with`
    # (3.11 and later) or of its last statement (3.9, 3.10); either is this test's.
    assert {w.lineno for w in caught if "on_trace_ready" in str(w.message)} <= {line, line + 2}


def test_stop_warning_points_at_the_stop_call():
    p = profiler.profile(schedule=profiler.schedule(wait=5, warmup=1, active=1),
                         on_trace_ready=lambda p: None)
    p.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        p.stop()
    _assert_at_caller(caught, "on_trace_ready was never called")
    assert [w.lineno for w in caught] == [line]


def test_python_side_warnings_point_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler.profile(use_cuda=False)
    _assert_at_caller(caught, "use_cuda is deprecated")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler.ExperimentalConfig(profiler_metrics=["kineto__cuda_core_flops"])
    _assert_at_caller(caught, "profiler_metrics")


def test_warning_on_another_thread_points_at_that_thread_s_caller():
    import threading

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = threading.Thread(target=lambda: _C._warn("from another thread"))
        t.start()
        t.join()
    assert [str(w.message) for w in caught] == ["from another thread"]
    assert caught[0].filename == __file__


# --- Information is logged, not warned ----------------------------------------------------------


def test_information_goes_to_the_opscope_logger_not_warnings(caplog):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level(logging.INFO, logger="opscope"):
            _C._inform("on-demand: trace written to /tmp/t.json")
    assert caught == []
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("opscope", logging.INFO, "on-demand: trace written to /tmp/t.json")]
    # Warnings stay warnings.
    with pytest.warns(UserWarning, match="^on-demand: busy$"):
        _C._warn("on-demand: busy")


# --- A wrong argument type: TypeError naming the parameter and the types allowed ---------------

_PYBIND_DUMP = "The following argument types are supported"


def _finished():
    with profiler.profile() as p:
        with record_function("work"):
            pass
    return p


@pytest.mark.parametrize("call, parameter, allowed", [
    (lambda: profiler.profile(record_shapes="yes"), "record_shapes", "a bool"),
    (lambda: profiler.profile(with_stack=[1]), "with_stack", "a bool"),
    (lambda: profiler.profile(acc_events="no"), "acc_events", "a bool"),
    (lambda: profiler.profile(activities=5), "activities", "ProfilerActivity"),
    (lambda: profiler.profile(activities=["cpu"]), "activities", "ProfilerActivity"),
    (lambda: profiler.profile(experimental_config={"verbose": False}), "experimental_config",
     "ExperimentalConfig"),
    (lambda: profiler.profile(schedule=3), "schedule", "a callable"),
    (lambda: profiler.schedule(wait="1", warmup=1, active=1), "wait", "an int"),
    (lambda: profiler.schedule(wait=1, warmup=1, active=1.5), "active", "an int"),
    (lambda: profiler.ExperimentalConfig(buffer_limit_bytes="1G"), "buffer_limit_bytes",
     "an int"),
    (lambda: profiler.ExperimentalConfig(verbose="no"), "verbose", "a bool"),
    (lambda: profiler.ExperimentalConfig(profiler_metrics="flops"), "profiler_metrics",
     "a list of str"),
    (lambda: profiler.tensorboard_trace_handler(7), "dir_name", "a str or os.PathLike"),
    (lambda: profiler.tensorboard_trace_handler("d", use_gzip="yes"), "use_gzip", "a bool"),
    (lambda: profiler.ExecutionTraceObserver().register_callback(3), "output_file_path",
     "a str or os.PathLike"),
    (lambda: profiler.activity_unavailable_reason("cuda"), "activity", "a ProfilerActivity"),
    (lambda: record_function(3), "name", "a string"),
    (lambda: _finished().key_averages(group_by_input_shape="x"), "group_by_input_shape",
     "a bool"),
    (lambda: _finished().key_averages(group_by_stack_n="5"), "group_by_stack_n", "an int"),
    (lambda: _finished().events().key_averages(group_by_stack_n=None), "group_by_stack_n",
     "an int"),
    (lambda: _finished().key_averages().table(sort_by=1), "sort_by", "a str or None"),
    (lambda: _finished().key_averages().table(row_limit="10"), "row_limit", "an int"),
    (lambda: _finished().key_averages().table(top_level_events_only="x"),
     "top_level_events_only", "a bool"),
    (lambda: _finished().export_chrome_trace(5), "path", "a str or os.PathLike"),
    (lambda: _finished().events().export_chrome_trace(None), "path", "a str or os.PathLike"),
    (lambda: _finished().export_stacks(b"x"), "path", "a str or os.PathLike"),
    (lambda: _finished().add_metadata("k", 1), "value", "a str"),
    (lambda: profiler.profile().add_metadata_json(1, "{}"), "key", "a str"),
])
def test_wrong_type_names_the_parameter_and_the_types(call, parameter, allowed):
    with pytest.raises(TypeError) as info:
        call()
    message = str(info.value)
    assert _PYBIND_DUMP not in message and "incompatible" not in message, message
    assert f"{parameter} must be" in message or f"{parameter} must hold" in message, message
    assert allowed in message, message


def test_right_types_still_accepted(tmp_path):
    import pathlib

    p = profiler.profile(record_shapes=1, with_stack=True, activities=(
        profiler.ProfilerActivity.CPU,), experimental_config=profiler.ExperimentalConfig(
            buffer_limit_bytes=1 << 20))
    with p:
        with record_function("work"):
            pass
    assert p.record_shapes is True
    p.export_chrome_trace(pathlib.Path(tmp_path / "t.json"))
    assert (tmp_path / "t.json").stat().st_size > 0
    assert "work" in p.key_averages(group_by_input_shape=True).table(row_limit=5)
    assert isinstance(profiler._ExperimentalConfig(), profiler.ExperimentalConfig)
