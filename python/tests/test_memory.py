"""profile_memory from Python (python/src/python_memory.cpp): the interpreter's allocations are
recorded while a window records memory, attributed to the innermost range, and reach the memory
columns, the [memory] events of events() and the trace, and the memory timeline."""

import json

import opscope._C as _C
import opscope.profiler as profiler
from opscope.profiler import record_function

MIB = 1 << 20


def row(p, key):
    return next(r for r in p.key_averages() if r.key == key)


def test_allocations_are_attributed_to_the_innermost_range():
    with profiler.profile(profile_memory=True) as p:
        with record_function("outer"):
            with record_function("allocates"):
                kept = bytes(MIB)  # one block of 1 MiB and a little
            with record_function("frees"):
                del kept
    allocates, frees, outer = row(p, "allocates"), row(p, "frees"), row(p, "outer")
    # The block, give or take the small objects the interpreter makes and frees meanwhile.
    assert abs(allocates.self_cpu_memory_usage - MIB) < 4096
    assert abs(frees.self_cpu_memory_usage + MIB) < 4096
    # outer holds both: what its children allocated and freed, about nothing in all.
    assert abs(outer.cpu_memory_usage) < 4096
    table = p.key_averages().table(sort_by="self_cpu_memory_usage")
    assert "CPU Mem" in table and "1.00 Mb" in table
    memory = [e for e in p.events() if e.name == "[memory]"]
    big = [e for e in memory if e.cpu_memory_usage >= MIB]
    assert len(big) == 1 and big[0].cpu_parent.name == "allocates"
    # FunctionEvent's own memory fields, as torch has them.
    event = next(e for e in p.events() if e.name == "allocates")
    assert event.self_cpu_memory_usage == allocates.self_cpu_memory_usage


def test_allocations_outside_every_range_share_a_memory_row():
    # torch 1.13 gives the reports no operator encloses a "[memory]" row of their own.
    with profiler.profile(profile_memory=True) as p:
        with record_function("inside"):
            pass
        kept = bytes(MIB)
    del kept
    memory = row(p, "[memory]")
    assert memory.cpu_memory_usage >= MIB and memory.self_cpu_memory_usage >= MIB
    assert memory.cpu_time_total == 0 and memory.count >= 1
    assert memory.cuda_memory_usage == 0 and memory.self_cuda_memory_usage == 0
    assert abs(row(p, "inside").cpu_memory_usage) < 4096
    table = p.key_averages().table()
    assert "[memory]" in table and "CUDA Mem" not in table


def test_the_trace_and_the_memory_timeline_hold_them(tmp_path):
    with profiler.profile(profile_memory=True, record_shapes=True, with_stack=True) as p:
        with record_function("allocates"):
            kept = [bytearray(64 * 1024) for _ in range(8)]
        del kept
    p.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())
    sizes = [e["args"]["Bytes"] for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert sum(1 for b in sizes if b >= 64 * 1024) >= 8
    assert sum(1 for b in sizes if b <= -64 * 1024) >= 8
    p.export_memory_timeline(str(tmp_path / "m.html"))
    assert "No memory was reported" not in (tmp_path / "m.html").read_text()


def test_allocators_are_wrapped_only_while_a_window_records_memory():
    assert not _C._python_memory_hooked()
    with profiler.profile():
        assert not _C._python_memory_hooked()  # no profile_memory
    states = []
    with profiler.profile(
        profile_memory=True, schedule=profiler.schedule(wait=1, warmup=1, active=1, repeat=1)
    ) as p:
        for _ in range(4):
            states.append((p.current_action.name, _C._python_memory_hooked()))
            p.step()
    assert states == [("NONE", False), ("WARMUP", False), ("RECORD_AND_SAVE", True), ("NONE", False)]
    assert not _C._python_memory_hooked()


def test_nothing_is_recorded_without_profile_memory():
    with profiler.profile() as p:
        with record_function("allocates"):
            kept = bytes(MIB)
        del kept
    assert not any(e.name == "[memory]" for e in p.events())
    assert row(p, "allocates").cpu_memory_usage == 0


def test_numpy_array_data_is_recorded_when_numpy_is_loaded():
    import pytest

    np = pytest.importorskip("numpy", reason="numpy (Debian: python3-numpy) is not installed")
    if not hasattr(np.core.multiarray, "get_handler_name"):
        # The build records array data only through numpy's data-memory handler (1.22 added it),
        # and leaves it out for an older numpy (python/CMakeLists.txt).
        pytest.skip(f"numpy {np.__version__} has no data-memory handler (1.22 added it)")
    before = np.core.multiarray.get_handler_name()
    with profiler.profile(profile_memory=True) as p:
        with record_function("numpy_alloc"):
            a = np.ones((256, 1024))  # 2 MiB of data
            assert np.core.multiarray.get_handler_name() == "opscope"
        with record_function("numpy_free"):
            del a
    assert np.core.multiarray.get_handler_name() == before
    assert abs(row(p, "numpy_alloc").self_cpu_memory_usage - 2 * MIB) < 4096
    assert abs(row(p, "numpy_free").self_cpu_memory_usage + 2 * MIB) < 4096


def test_the_thread_that_profiles_memory_keeps_its_threading_name():
    # In a fresh process the first thing the main thread records under profile_memory is an
    # allocation, and an allocator cannot ask `threading` for the name: the thread was left
    # with its OS name ("python3") for the whole process, unless start() names it first.
    import subprocess
    import sys

    script = (
        "import opscope.profiler as p\n"
        "with p.profile(profile_memory=True) as prof:\n"
        "    kept = [bytearray(64) for _ in range(10)]\n"
        "    with p.record_function('after_allocations'):\n"
        "        pass\n"
        "print(sorted({e.thread_name for e in prof.events()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['MainThread']", done.stdout + done.stderr
