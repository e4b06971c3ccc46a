"""opscope.profiler.flight_recorder (python/src/flight_recorder.cpp and profiler.py): the last
seconds of Python ranges dumped on demand, at an uncaught exception and at a crash, with
their names and nesting and the ranges still open; arguments, one recorder per process, and
Profiler windows pausing it.

Children run with sys.executable and the package this suite imports, so that an exception or a crash
ends them and not the suite."""

import bisect
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import opscope._C as _C
import opscope.profiler as profiler
from opscope.profiler import dump_flight_recorder, flight_recorder, record_function

from conftest import complete_events, encloses, load_trace

MIB = 1 << 20


@pytest.fixture(autouse=True)
def no_recorder_left_running():
    """A test that leaves its recorder running would make every later one fail: stop it, and
    fail the test that left it."""
    yield
    left = profiler._flight
    if left is not None:
        left.stop()
    assert not _C.flight_recorder_running(), "a test left a flight recorder running"
    assert left is None, f"a test left {left!r} running"


def only(trace, name):
    events = complete_events(trace, name)
    assert len(events) == 1, f"{len(events)} events named {name!r}"
    return events[0]


def is_open(event):
    return event.get("args", {}).get("open") is True


def holds(outer, inner):
    """encloses(), but for ranges open at the dump, which all end at the dump's time: their
    ends, ts + dur in microseconds with three decimals, may differ by a rounding error."""
    return (outer["tid"] == inner["tid"] and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 0.002)


def run_child(tmp_path, source, *args, expect_rc=None):
    """Runs `source` as a Python program in tmp_path; returns the finished process."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(source))
    # The package this suite imports, found from tmp_path (PYTHONPATH may be relative).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(profiler.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    done = subprocess.run([sys.executable, str(script), *map(str, args)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    if expect_rc is not None:
        assert done.returncode == expect_rc, done.stderr
    return done


# -- dumps -----------------------------------------------------------------------------------


def test_dump_holds_the_last_ranges_with_their_nesting(tmp_path):
    with flight_recorder(keep=60, max_bytes=MIB) as fr:
        for i in range(3):
            with record_function("fl::step"):
                with record_function("fl::forward"):
                    with record_function("fl::layer"):
                        pass
        # C++ threads record into it too.
        _C._run_native_threads(2, "fl::native_outer", "fl::native_inner", 3)
        dump = fr.dump(tmp_path / "dump.json")
        assert fr.running
    assert dump.path == str(tmp_path / "dump.json") and os.fspath(dump) == dump.path
    assert dump.open_ranges == 0
    trace = load_trace(dump.path)
    steps = complete_events(trace, "fl::step")
    forwards = complete_events(trace, "fl::forward")
    layers = complete_events(trace, "fl::layer")
    assert len(steps) == len(forwards) == len(layers) == 3
    assert dump.events >= 9
    for step, forward, layer in zip(*(sorted(x, key=lambda e: e["ts"])
                                      for x in (steps, forwards, layers))):
        assert encloses(step, forward) and encloses(forward, layer)
    assert len(complete_events(trace, "fl::native_inner")) == 6
    meta = trace["flightRecorder"]
    assert meta["trigger"] == "dump()"
    assert meta["openRanges"] == 0 and meta["keepSeconds"] == 60


def test_dump_while_threads_record(tmp_path):
    stop = threading.Event()
    started = threading.Event()

    def busy():
        while not stop.is_set():
            with record_function("fl::busy_outer"):
                with record_function("fl::busy_inner"):
                    started.set()

    with flight_recorder(max_bytes=4 * MIB) as fr:
        worker = threading.Thread(target=busy, name="busy-worker")
        worker.start()
        try:
            assert started.wait(60)
            dumps = [fr.dump(tmp_path / f"busy{i}.json") for i in range(3)]
        finally:
            stop.set()
            worker.join()
    for dump in dumps:
        trace = load_trace(dump.path)
        inner = complete_events(trace, "fl::busy_inner")
        outer = complete_events(trace, "fl::busy_outer")
        assert inner and outer
        # Each inner range lies inside the outer one begun right before it, but the oldest
        # (its outer range may have been overwritten); the outer ones do not overlap.
        outer.sort(key=lambda e: e["ts"])
        starts = [o["ts"] for o in outer]
        held = sum(1 for e in inner
                   if (i := bisect.bisect_right(starts, e["ts"]) - 1) >= 0
                   and encloses(outer[i], e))
        assert held >= len(inner) - 1
        assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(outer, outer[1:]))
        names = {e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        assert "busy-worker" in names


def test_ranges_open_at_the_dump_are_written_open(tmp_path):
    entered = threading.Event()
    release = threading.Event()

    def waiter():
        with record_function("fl::waiting"):
            entered.set()
            release.wait(60)

    with flight_recorder(max_bytes=MIB) as fr:
        thread = threading.Thread(target=waiter)
        thread.start()
        try:
            assert entered.wait(60)
            with record_function("fl::outer_open"):
                with record_function("fl::done"):
                    pass
                with record_function("fl::inner_open"):
                    dump = fr.dump(tmp_path / "open.json")
        finally:
            release.set()
            thread.join()
    assert dump.open_ranges == 3
    trace = load_trace(dump.path)
    outer, inner = only(trace, "fl::outer_open"), only(trace, "fl::inner_open")
    waiting, done = only(trace, "fl::waiting"), only(trace, "fl::done")
    assert is_open(outer) and is_open(inner) and is_open(waiting)
    assert not is_open(done)
    assert encloses(outer, done) and holds(outer, inner)
    assert trace["flightRecorder"]["openRanges"] == 3


def test_a_dump_holds_only_the_last_keep_seconds(tmp_path):
    # keep is well above the time between the last range and the dump, even on a loaded
    # machine; the sleep is longer than keep whatever the load.
    with flight_recorder(keep=1.0, max_bytes=MIB) as fr:
        with record_function("fl::long_ago"):
            pass
        threading.Event().wait(1.3)
        with record_function("fl::just_now"):
            pass
        dump = fr.dump(tmp_path / "keep.json")
    trace = load_trace(dump.path)
    assert not complete_events(trace, "fl::long_ago")
    assert len(complete_events(trace, "fl::just_now")) == 1
    assert trace["flightRecorder"]["recordsOlderThanKeep"] >= 1


def test_the_context_manager_stops_the_recorder_even_when_its_block_raises(tmp_path):
    with pytest.raises(KeyError):
        with flight_recorder(max_bytes=MIB) as fr:
            assert fr.running and _C.flight_recorder_running()
            raise KeyError("x")
    assert not fr.running and not _C.flight_recorder_running()
    with pytest.raises(RuntimeError, match=r"^flight_recorder\.dump\(\): this flight recorder "
                       r"was stopped"):
        fr.dump(tmp_path / "late.json")
    assert not (tmp_path / "late.json").exists()
    fr.stop()  # a second stop does nothing
    with flight_recorder(max_bytes=MIB) as again:  # and another may start
        assert again.running


def test_a_recorder_without_a_reference_records_until_stopped(tmp_path):
    flight_recorder(max_bytes=MIB)  # always on: kept alive by the package until stop()
    import gc

    gc.collect()
    assert _C.flight_recorder_running()
    with record_function("fl::unreferenced"):
        pass
    dump = dump_flight_recorder(tmp_path / "any.json")
    profiler._flight.stop()
    trace = load_trace(dump.path)
    assert len(complete_events(trace, "fl::unreferenced")) == 1
    assert trace["flightRecorder"]["trigger"] == "dump_flight_recorder()"


def test_dump_flight_recorder_without_one_says_how_to_start_one(tmp_path):
    with pytest.raises(RuntimeError, match=r"^dump_flight_recorder\(\): no flight recorder "
                       r"records.*OPSCOPE_FLIGHT_RECORDER"):
        dump_flight_recorder(tmp_path / "none.json")


def test_a_second_recorder_is_refused_naming_the_first():
    with flight_recorder(keep=12, max_bytes=MIB):  # this line is named below
        line = sys._getframe().f_lineno - 1
        with pytest.raises(RuntimeError) as error:
            flight_recorder(max_bytes=MIB)
        message = str(error.value)
        assert message.startswith("flight_recorder(): a flight recorder is already recording")
        assert f"flight_recorder(keep=12) started at {__file__}:{line}" in message
        assert "one records at a time" in message
        assert _C.flight_recorder_running()  # the first goes on


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"keep": "60"}, TypeError, "keep must be a number (int or float), got str '60'"),
        ({"keep": True}, TypeError, "keep must be a number"),
        ({"keep": 0}, ValueError, "keep must be a number of seconds above 0, got 0.0"),
        ({"keep": float("inf")}, ValueError, "keep must be a number of seconds above 0"),
        ({"max_bytes": 1.5}, TypeError, "max_bytes must be an int, got float 1.5"),
        ({"max_bytes": 1000}, ValueError, "max_bytes must be at least 262144 (256 KiB), got 1000"),
        ({"with_stack": "yes"}, TypeError, "with_stack must be a bool (True or False)"),
        ({"profile_memory": 2}, TypeError, "profile_memory must be a bool"),
        ({"slow_step_factor": 0.5}, ValueError,
         "slow_step_factor must be 0 (off) or a factor above 1, got 0.5"),
        ({"slow_step_window": 2}, ValueError,
         "slow_step_window must be between 3 and 10000 steps, got 2"),
        ({"slow_step_window": 5.0}, TypeError, "slow_step_window must be an int"),
        ({"slow_step_min_interval": -1}, ValueError,
         "slow_step_min_interval must be seconds, 0 or more, got -1.0"),
        ({"dump_dir": 3}, TypeError, "dump_dir must be a str or os.PathLike"),
        ({"dump_dir": "/nonexistent/opscope"}, ValueError,
         "dump_dir must be an existing directory"),
        ({"dump_on_crash": None}, TypeError, "dump_on_crash must be a bool"),
        ({"dump_on_exception": "no"}, TypeError, "dump_on_exception must be a bool"),
    ],
)
def test_bad_arguments_name_the_parameter_and_what_is_allowed(kwargs, error, words):
    with pytest.raises(error) as raised:
        flight_recorder(**kwargs)
    assert str(raised.value).startswith("flight_recorder(): ")
    assert words in str(raised.value)
    assert not _C.flight_recorder_running()


def test_bad_dump_paths_are_named(tmp_path):
    with flight_recorder(max_bytes=MIB) as fr:
        with pytest.raises(TypeError, match=r"flight_recorder\.dump\(\): path must be a str or "
                           r"os\.PathLike"):
            fr.dump(12)
        with pytest.raises(RuntimeError, match=r"^flight_recorder\.dump\(\): .*missing/t\.json"):
            fr.dump(tmp_path / "missing" / "t.json")
        assert fr.dump(tmp_path / "ok.json").events >= 0  # and it goes on
    with pytest.raises(TypeError, match=r"decode_flight_dump\(\): raw_path must be"):
        profiler.decode_flight_dump(None, tmp_path / "x.json")


def test_a_slow_step_among_fast_ones_dumps_into_dump_dir(tmp_path):
    # Fast steps of 20 ms; a step counts as slow above 5 times their median (100 ms), and the
    # slow one takes a second. A fast step slowed past 100 ms by a loaded machine may dump too
    # (the interval is 0), so the test asks only that a dump holds the slow step.
    with flight_recorder(max_bytes=MIB, slow_step_factor=5, slow_step_window=5,
                         slow_step_min_interval=0, dump_dir=tmp_path) as fr:
        fr.step()
        for _ in range(5):
            with record_function("fl::fast_step"):
                threading.Event().wait(0.02)
            fr.step()
        with record_function("fl::slow_step"):
            threading.Event().wait(1.0)
        fr.step()
    dumps = sorted(os.listdir(tmp_path))
    assert dumps and all("_slow_step_" in name for name in dumps), dumps
    trace = load_trace(tmp_path / dumps[-1])
    assert trace["flightRecorder"]["trigger"] == "slow step"
    assert len(complete_events(trace, "fl::slow_step")) == 1
    assert len(complete_events(trace, "fl::fast_step")) == 5


def test_a_slow_steps_failed_dump_warns_at_the_users_step_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    with flight_recorder(max_bytes=MIB, slow_step_factor=5, slow_step_window=3,
                         slow_step_min_interval=0, dump_dir=gone) as fr:
        fr.step()
        for _ in range(3):
            threading.Event().wait(0.02)
            fr.step()
        for name in os.listdir(gone):  # a fast step slowed by load may have dumped
            os.remove(gone / name)
        gone.rmdir()
        threading.Event().wait(1.0)
        with pytest.warns(UserWarning, match="slow step's dump was not written") as warned:
            fr.step()
            line = sys._getframe().f_lineno - 1
    assert warned[0].filename == __file__ and warned[0].lineno == line


# -- lenses ----------------------------------------------------------------------------------


def test_with_stack_gives_python_frames(tmp_path):
    def in_a_named_function():
        with record_function("fl::stacked"):
            pass

    with flight_recorder(max_bytes=MIB, with_stack=True) as fr:
        in_a_named_function()
        dump = fr.dump(tmp_path / "stack.json")
    frames = only(load_trace(dump.path), "fl::stacked")["args"]["Call stack"].split(";")
    assert any(f.endswith(": in_a_named_function") for f in frames), frames
    assert any(f.endswith(": test_with_stack_gives_python_frames") for f in frames), frames


def test_profile_memory_wraps_python_allocators_while_it_records(tmp_path):
    assert not _C._python_memory_hooked()
    with flight_recorder(max_bytes=4 * MIB, profile_memory=True) as fr:
        assert _C._python_memory_hooked()
        # A window without profile_memory pauses the recorder and unwraps them; its end
        # gives the recorder its lenses back, and the wrappers with them.
        with profiler.profile():
            assert not _C._python_memory_hooked()
        assert _C._python_memory_hooked()
        with record_function("fl::allocates"):
            kept = [bytearray(64 * 1024) for _ in range(4)]
        del kept
        dump = fr.dump(tmp_path / "memory.json")
    assert not _C._python_memory_hooked()
    trace = load_trace(dump.path)
    sizes = [e["args"]["Bytes"] for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert sum(1 for b in sizes if b >= 64 * 1024) >= 4
    assert sum(1 for b in sizes if b <= -64 * 1024) >= 4


# -- living with Profiler windows ------------------------------------------------------------


def test_a_profile_window_pauses_the_recorder(tmp_path):
    with flight_recorder(max_bytes=MIB) as fr:
        with record_function("fl::before_window"):
            pass
        with profiler.profile() as p:
            with record_function("fl::in_window"):
                pass
        with record_function("fl::after_window"):
            pass
        dump = fr.dump(tmp_path / "paused.json")
    trace = load_trace(dump.path)
    assert len(complete_events(trace, "fl::before_window")) == 1
    assert len(complete_events(trace, "fl::after_window")) == 1
    assert not complete_events(trace, "fl::in_window")
    assert [e.name for e in p.events()].count("fl::in_window") == 1
    paused = trace["flightRecorder"]["pausedNs"]
    assert len(paused) == 1 and paused[0][0] <= paused[0][1]
    # The pause lies between the ranges before and after the window: wall-clock ns against
    # the trace's microseconds after baseTimeNanoseconds, a microsecond spared for rounding.
    before, after = only(trace, "fl::before_window"), only(trace, "fl::after_window")
    start_us, end_us = ((t - trace["baseTimeNanoseconds"]) / 1000 for t in paused[0])
    assert start_us >= before["ts"] + before["dur"] - 1
    assert end_us <= after["ts"] + 1


# -- the GIL ---------------------------------------------------------------------------------

# The first dump writes into a FIFO that a Python thread reads: the thread runs Python code,
# so if the dump held the GIL it would never read and both would wait forever (the child's
# timeout says so). Meanwhile the reader asks for a second dump (refused, naming both paths),
# and the main thread's stop() waits for the first dump, also without the GIL.
GIL_CHILD = """
import os, threading
from opscope.profiler import flight_recorder, record_function

fr = flight_recorder(max_bytes=1 << 20)
for i in range(20000):
    with record_function("fl::fill"):
        pass
os.mkfifo("slow.json")
state = {}
begun = threading.Event()

def reader():
    with open("slow.json", "rb", buffering=0) as f:
        state["bytes"] = len(f.read(1))  # the first dump has begun writing
        with record_function("fl::reader_records"):
            pass
        try:
            fr.dump("second.json")
        except RuntimeError as e:
            state["refused"] = str(e)
        begun.set()
        while chunk := f.read(65536):
            state["bytes"] += len(chunk)

thread = threading.Thread(target=reader)
thread.start()
first = threading.Thread(target=lambda: state.setdefault("first", fr.dump("slow.json")))
first.start()
assert begun.wait(60)
fr.stop()  # waits for the first dump, which waits for the reader
first.join()
thread.join()
print(state["refused"])
print(state["bytes"], state["first"].events, os.path.exists("second.json"), fr.running)
"""


def test_dumps_and_stop_run_without_the_gil(tmp_path):
    done = run_child(tmp_path, GIL_CHILD, expect_rc=0)
    refused, counts = done.stdout.splitlines()
    assert refused.startswith("flight_recorder.dump(): cannot write 'second.json'")
    assert "slow.json" in refused and "one at a time" in refused
    size, events, second_exists, running = counts.split()
    assert int(size) > 1000 and int(events) >= 1000
    assert second_exists == "False" and running == "False"


# -- an uncaught exception -------------------------------------------------------------------

EXCEPTION_CHILD = """
import sys, threading
import opscope.profiler as profiler
from opscope.profiler import flight_recorder, record_function

where = sys.argv[1]
previous = []
sys.excepthook = lambda *exc: (previous.append("sys"), sys.__excepthook__(*exc))
threading.excepthook = lambda args: (previous.append("threading"),
                                     threading.__excepthook__(args))
flight_recorder(keep=60, max_bytes=1 << 20, dump_dir="dumps")

held = threading.Event()
def loader():
    with record_function("fl::loader_wait"):
        held.set()
        threading.Event().wait()  # open until the process ends
threading.Thread(target=loader, daemon=True).start()
assert held.wait(60)

def train():
    for step in range(3):
        with record_function(f"fl::step{step}"):
            with record_function("fl::forward"):
                with record_function("fl::layer"):
                    if step == 2:
                        raise ValueError("bad batch")

if where == "thread":
    with record_function("fl::main_join"):
        worker = threading.Thread(target=train, name="trainer")
        worker.start()
        worker.join()
    print("hooks", previous)
else:
    import atexit
    atexit.register(lambda: print("hooks", previous))
    train()
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_an_uncaught_exception_dumps_the_last_ranges(tmp_path, where):
    (tmp_path / "dumps").mkdir()
    done = run_child(tmp_path, EXCEPTION_CHILD, where, expect_rc=1 if where == "main" else 0)
    assert "ValueError: bad batch" in done.stderr
    # The previous hook ran after the dump.
    assert f"hooks ['{'sys' if where == 'main' else 'threading'}']" in done.stdout
    dumps = os.listdir(tmp_path / "dumps")
    assert len(dumps) == 1, dumps
    name = dumps[0]
    assert name.startswith("opscope_flight_") and "_exception_" in name and name.endswith(".json")
    path = str(tmp_path / "dumps" / name)
    assert path in done.stderr  # where it went is said before the traceback
    trace = load_trace(path)
    assert trace["flightRecorder"]["trigger"] == "exception"
    # The last steps, with their names and nesting: the ranges the exception unwound are
    # closed by then, and hold one another.
    for step in ("fl::step0", "fl::step1", "fl::step2"):
        outer = only(trace, step)
        assert not is_open(outer)
        forward = [e for e in complete_events(trace, "fl::forward") if encloses(outer, e)]
        layer = [e for e in complete_events(trace, "fl::layer") if encloses(forward[0], e)]
        assert len(forward) == 1 and len(layer) == 1
    # The ranges open at the raise: the loader's wait, and in the thread case the main
    # thread's join, which holds the trainer's steps in time.
    assert is_open(only(trace, "fl::loader_wait"))
    if where == "thread":
        join = only(trace, "fl::main_join")
        assert is_open(join)
        step2 = only(trace, "fl::step2")
        assert join["ts"] <= step2["ts"] and step2["tid"] != join["tid"]
        assert trace["flightRecorder"]["openRanges"] == 2
    else:
        assert trace["flightRecorder"]["openRanges"] == 1


def test_no_exception_dump_when_turned_off(tmp_path):
    (tmp_path / "dumps").mkdir()
    source = EXCEPTION_CHILD.replace('dump_dir="dumps"', 'dump_dir="dumps", '
                                     'dump_on_exception=False')
    done = run_child(tmp_path, source, "main", expect_rc=1)
    assert "ValueError: bad batch" in done.stderr and "hooks ['sys']" in done.stdout
    assert os.listdir(tmp_path / "dumps") == []


def test_stop_gives_the_exception_hooks_back():
    before = (sys.excepthook, threading.excepthook)
    with flight_recorder(max_bytes=MIB):
        assert sys.excepthook is not before[0] and threading.excepthook is not before[1]
    assert (sys.excepthook, threading.excepthook) == before
    with flight_recorder(max_bytes=MIB, dump_on_exception=False):
        assert (sys.excepthook, threading.excepthook) == before


# -- a crash ---------------------------------------------------------------------------------

CRASH_CHILD = """
import os, sys
from opscope.profiler import flight_recorder, record_function

flight_recorder(keep=60, max_bytes=1 << 20, dump_dir="dumps", dump_on_crash=True)
for step in range(3):
    with record_function(f"fl::crash_step{step}"):
        with record_function("fl::crash_inner"):
            pass
with record_function("fl::aborting"):
    sys.stdout.flush()
    os.abort()
"""


def test_a_crash_leaves_a_raw_dump_that_decodes(tmp_path):
    (tmp_path / "dumps").mkdir()
    done = run_child(tmp_path, CRASH_CHILD)
    assert done.returncode == -6, done.stderr  # SIGABRT, chained to the default action
    raw = [n for n in os.listdir(tmp_path / "dumps") if n.endswith("_crash.raw")]
    assert len(raw) == 1 and raw[0].startswith("opscope_flight_"), os.listdir(tmp_path / "dumps")
    out = tmp_path / "crash.json"
    dump = profiler.decode_flight_dump(tmp_path / "dumps" / raw[0], out)
    assert dump.path == str(out)
    trace = load_trace(out)
    for step in range(3):
        outer = only(trace, f"fl::crash_step{step}")
        assert any(encloses(outer, e) for e in complete_events(trace, "fl::crash_inner"))
    assert is_open(only(trace, "fl::aborting"))
    with pytest.raises(RuntimeError, match=r"^decode_flight_dump\(\): .*crash\.json"):
        profiler.decode_flight_dump(out, tmp_path / "again.json")  # not a raw dump
