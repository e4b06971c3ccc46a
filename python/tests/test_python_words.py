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
    _assert_at_caller(caught, "`use_cuda` is deprecated")
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


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_information_goes_to_the_opscope_logger_not_warnings():
    logger = logging.getLogger("opscope")
    # A handler of its own on the logger, and logging enabled for the test: the HTA tests of
    # this suite (test_analysis, test_hta_numbers, test_critical_path) call
    # logging.disable(WARNING) at import to quiet HTA, which drops INFO records everywhere.
    records = _Records()
    saved = (logger.level, logger.disabled, logging.root.manager.disable)
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    logger.disabled = False
    logging.disable(logging.NOTSET)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _C._inform("on-demand: trace written to /tmp/t.json")
    finally:
        logger.removeHandler(records)
        logger.setLevel(saved[0])
        logger.disabled = saved[1]
        logging.disable(saved[2])
    assert caught == []
    assert [(r.name, r.levelno, r.getMessage()) for r in records.records] == [
        ("opscope", logging.INFO, "on-demand: trace written to /tmp/t.json")]
    # Warnings stay warnings.
    with pytest.warns(UserWarning, match="^on-demand: busy$"):
        _C._warn("on-demand: busy")
