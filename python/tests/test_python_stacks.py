"""Python frames in with_stack stacks (python/src/python_stacks.cpp): the "Call stack" of
traces, FunctionEvent.stack, export_stacks and group_by_stack_n tables; module frames."""

import os
import sys
import threading

import opscope
import opscope._C as _C
from conftest import complete_events
from opscope.profiler import RecordFunctionFast, profile, record_function

# opscope.module once the package exports it; the native type it is.
module = getattr(opscope, "module", _C.ModuleScope)

HERE = os.path.basename(__file__)
LINES = {}


def mark(key):
    """Remembers the line after the caller's current one: where its `with` is."""
    LINES[key] = sys._getframe(1).f_lineno + 1


def frame(key, function):
    return f"{HERE}({LINES[key]}): {function}"


def short(frames):
    """The frames of this file, with the directory a sys.path entry may leave."""
    return [f[f.index(HERE):] if HERE in f else f for f in frames]


def leaf_fast():
    mark("leaf_fast")
    with RecordFunctionFast("fast_op"):
        # Some self time: export_stacks leaves out stacks whose metric rounds to 0 us.
        sum(range(5000))


def leaf_user():
    mark("leaf_user")
    with record_function("user_op"):
        pass


def caller():
    mark("caller_fast")
    leaf_fast()
    mark("caller_user")
    leaf_user()


def only(prof, name):
    found = [e for e in prof.events() if e.name == name]
    assert len(found) == 1, [e.name for e in prof.events()]
    return found[0]


def run_caller(**options):
    with profile(**options) as prof:
        mark("run_caller")
        caller()
    return prof


def test_ranges_begun_from_python_carry_the_python_stack():
    prof = run_caller(with_stack=True)
    fast = short(only(prof, "fast_op").stack)
    user = short(only(prof, "user_op").stack)
    # Innermost first: the function holding the range, its callers, up to this test.
    assert fast[:3] == [
        frame("leaf_fast", "leaf_fast"),
        frame("caller_fast", "caller"),
        frame("run_caller", "run_caller"),
    ]
    assert user[:3] == [
        frame("leaf_user", "leaf_user"),
        frame("caller_user", "caller"),
        frame("run_caller", "run_caller"),
    ]
    assert any("test_ranges_begun_from_python_carry_the_python_stack" in f for f in fast)
    # The interpreter's own native frames are replaced, not shown.
    assert not any("python3" in f or "_C.cpython" in f for f in fast), fast


def test_paths_are_relative_to_sys_path():
    prof = run_caller(with_stack=True)
    innermost = only(prof, "fast_op").stack[0]
    here = os.path.dirname(os.path.abspath(__file__))
    expected = HERE if here in sys.path else os.path.abspath(__file__)
    assert innermost.startswith(expected + "("), innermost


def test_no_stack_without_with_stack():
    prof = run_caller()
    assert only(prof, "fast_op").stack == []


def test_chrome_trace_call_stack(trace_of):
    trace = trace_of(run_caller(with_stack=True))
    (event,) = complete_events(trace, "fast_op")
    frames = short(event["args"]["Call stack"].split(";"))
    assert frames[:2] == [frame("leaf_fast", "leaf_fast"), frame("caller_fast", "caller")]


def test_export_stacks(tmp_path):
    prof = run_caller(with_stack=True)
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    lines = path.read_text().splitlines()
    # Outermost first, spaces as underscores, the range's name last (PyTorch's format).
    expected = ";".join(
        [
            frame("run_caller", "run_caller"),
            frame("caller_fast", "caller"),
            frame("leaf_fast", "leaf_fast"),
            "fast_op",
        ]
    ).replace(" ", "_")
    assert any(line.rsplit(" ", 1)[0].endswith(expected) for line in lines), lines


def two_call_sites():
    for _ in range(2):
        mark("site_a")
        with RecordFunctionFast("sited"):
            pass
    mark("site_b")
    with RecordFunctionFast("sited"):
        pass


def test_group_by_stack_n_splits_call_sites():
    with profile(with_stack=True) as prof:
        two_call_sites()
    rows = [r for r in prof.key_averages(group_by_stack_n=1) if r.key == "sited"]
    assert sorted(r.count for r in rows) == [1, 2]
    table = prof.key_averages(group_by_stack_n=2).table(row_limit=-1)
    assert frame("site_a", "two_call_sites") in table
    assert frame("site_b", "two_call_sites") in table
    # Without grouping by stack, one row.
    assert [r.count for r in prof.key_averages() if r.key == "sited"] == [3]


def entered_module():
    mark("entered_module")
    with module("Linear_0"):
        mark("in_module")
        with RecordFunctionFast("linear"):
            pass


def model_forward():
    mark("model_forward")
    with module("Model"):
        mark("model_calls")
        entered_module()


def test_module_frames():
    with profile(with_stack=True, with_modules=True) as prof:
        model_forward()
    e = only(prof, "linear")
    assert e.module_hierarchy.endswith("Model.Linear_0")
    frames = short(e.stack)
    # As C++ module frames: a module's frame comes right before (inside) the frame of the
    # function that entered it.
    assert frames[:4] == [
        "nn.Module: Linear_0",
        frame("in_module", "entered_module"),
        "nn.Module: Model",
        frame("model_calls", "model_forward"),
    ]


def test_module_scope_costs_nothing_without_with_modules():
    with profile(with_stack=True) as prof:
        model_forward()
    e = only(prof, "linear")
    assert not any(f.startswith("nn.Module") for f in e.stack)
    assert not e.module_hierarchy


def test_module_scope_misuse():
    import pytest

    with pytest.raises(TypeError):
        module(3)
    scope = module("Once")
    with profile(with_modules=True):
        with scope:
            with pytest.raises(RuntimeError, match="already entered"):
                scope.__enter__()


def test_python_threads_have_their_own_stacks():
    stacks = {}

    def worker():
        with RecordFunctionFast("in_thread"):
            pass

    with profile(with_stack=True) as prof:
        t = threading.Thread(target=worker, name="py-worker")
        t.start()
        t.join()
    e = only(prof, "in_thread")
    stacks["thread"] = e.stack
    assert "worker" in e.stack[0]
    assert any("threading.py" in f for f in e.stack)  # the thread's bootstrap
    assert not any("test_python_threads_have_their_own_stacks" in f for f in e.stack)


def test_native_threads_keep_native_frames():
    with profile(with_stack=True) as prof:
        _C._run_native_threads(2, "native_outer", "native_inner", 2)
    natives = [e for e in prof.events() if e.name == "native_outer"]
    assert len(natives) == 2
    for e in natives:
        # No GIL on those threads: no Python frame may be read, none is invented.
        assert not any(".py(" in f for f in e.stack), e.stack


def test_native_callers_through_the_c_api_keep_their_frames():
    # An extension recording through the C API capsule, here called by ctypes (libffi and
    # _ctypes are that "extension"): its native frames stay, innermost, then the Python
    # frames that called it; the capsule's own entry point in _C is left out.
    import ctypes

    # PYFUNCTYPE: called with the GIL held, as an extension's code called from Python is.
    begin_type = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
    end_type = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)

    class Api(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
                    ("range_begin", begin_type), ("range_end", end_type)]

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api = Api.from_address(get_pointer(_C._C_API, b"opscope._C._C_API"))

    with profile(with_stack=True) as prof:
        mark("capi")
        api.range_end(api.range_begin(b"from_capi", 9, 0))
    stack = only(prof, "from_capi").stack
    python = [i for i, f in enumerate(stack) if ".py(" in f]
    assert python, stack
    assert python[0] > 0, stack  # native frames first: the caller's (ctypes'), not _C's
    assert not any("_C.cpython" in f or "range_begin" in f for f in stack[: python[0]]), stack
    assert short(stack)[python[0]] == frame("capi", "test_native_callers_through_the_c_api_keep_their_frames")


def test_a_step_range_starts_at_the_users_call_without_opscope_frames():
    with profile(with_stack=True, schedule=lambda step: 2) as p:  # RECORD every step
        mark("step_call")
        p.step()
    steps = [e for e in p.events() if e.name == "ProfilerStep*"]
    assert [e.trace_name for e in steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    stack = short(steps[1].stack)
    assert stack[0] == frame("step_call", "test_a_step_range_starts_at_the_users_call_without_opscope_frames")
    assert not any("opscope/" in f or "python3" in f or "+0x" in f for f in steps[1].stack), stack
    # The first step range began in __enter__, at the `with` line.
    assert "opscope/" not in steps[0].stack[0] and HERE in steps[0].stack[0], steps[0].stack


@record_function("decorated_op")
def decorated():
    sum(range(100))


def test_a_decorated_function_has_no_wrapper_frame():
    with profile(with_stack=True) as p:
        mark("decorated_call")
        decorated()
    stack = short(only(p, "decorated_op").stack)
    assert stack[0] == frame("decorated_call", "test_a_decorated_function_has_no_wrapper_frame")
    assert not any("opscope/profiler.py" in f for f in stack), stack


def test_python_threads_are_named_as_threading_names_them():
    def work():
        with record_function("on_loader"):
            pass

    with profile() as p:
        with record_function("on_main"):
            pass
        t = threading.Thread(target=work, name="loader-7")
        t.start()
        t.join()  # gone before the window stops: the name was taken when it first recorded
    names = {e.name: e.thread_name for e in p.events()}
    assert names["on_loader"] == "loader-7"
    assert names["on_main"] == threading.main_thread().name


# --- the file in speedscope (its own importer under Node.js, as tests/unit does for C++) ---

SPEEDSCOPE_VERSION = "1.25.0"
IMPORT_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "support",
                             "speedscope_import.mjs")


def speedscope_package(tmp_path):
    """speedscope from npm: the copy the C++ tests keep in the build tree when there is one,
    else installed into tmp_path. pytest.skip with the reason when it cannot be had."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node or npm is not installed (Debian: nodejs, npm)")
    build_tests = os.path.join(os.path.dirname(opscope.__file__), "..", "..", "tests")
    cache_root = build_tests if os.path.isdir(build_tests) else str(tmp_path)
    cache = os.path.join(cache_root, f"speedscope-{SPEEDSCOPE_VERSION}")
    package = os.path.join(cache, "node_modules", "speedscope")
    if os.path.exists(os.path.join(package, "package.json")):
        return package
    staging = f"{cache}.tmp.{os.getpid()}"  # renamed when whole: never half-installed
    shutil.rmtree(staging, ignore_errors=True)
    done = subprocess.run(
        ["timeout", "300", "npm", "install", "--no-audit", "--no-fund", "--no-save",
         "--fetch-retries=1", "--fetch-timeout=60000", "--prefer-offline", "--prefix", staging,
         f"speedscope@{SPEEDSCOPE_VERSION}"], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.skip(f"npm could not install speedscope (registry unreachable?): "
                    f"{done.stdout[-300:]}{done.stderr[-300:]}")
    try:
        os.rename(staging, cache)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another run got there first
    return package


def test_speedscope_reads_python_stacks_as_the_user_wrote_them(tmp_path):
    import subprocess

    package = speedscope_package(tmp_path)

    def work():
        with record_function("work_op"):
            sum(range(20000))

    with profile(with_stack=True, schedule=lambda step: 2) as p:  # every step records
        for _ in range(3):
            work()
            p.step()
    path = tmp_path / "stacks.txt"
    p.export_stacks(str(path))
    ours = {}
    for line in path.read_text().splitlines():
        frames, _, weight = line.rpartition(" ")
        ours[frames] = ours.get(frames, 0) + int(weight)
    done = subprocess.run(["node", IMPORT_SCRIPT, package, str(path), "profile.collapsedstack.txt"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    got = json.loads(done.stdout[done.stdout.rfind("\n{") + 1:])
    assert got["importer"] == "Importing as collapsed stack format"
    assert got["total"] == sum(ours.values())
    stacks = [s for s, _ in got["stacks"]]
    # Every frame is the user's: no interpreter or extension addresses, no opscope code.
    for stack in stacks:
        for f in stack.split(";"):
            assert "+0x" not in f and "opscope/" not in f and "python3" not in f, stack
    # The step ranges start at the step() call, the work at work()'s range.
    assert any(s.split(";")[-1].startswith("ProfilerStep#") and
               "test_speedscope_reads_python_stacks_as_the_user_wrote_them" in s.split(";")[-2]
               for s in stacks), stacks
    assert any(s.endswith(";work_op") and "work" in s.split(";")[-2] for s in stacks), stacks
