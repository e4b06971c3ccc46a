"""Ranges from Python threads and from C++ threads land in the session of the profile that
the main thread started; the GIL is released while the profiler works."""

import threading
import time

import opscope._C as _C
import opscope.profiler as profiler
from opscope.profiler import record_function

from conftest import complete_events, encloses


def test_python_threads_land_in_the_same_session(trace_of):
    tids = {}
    barrier = threading.Barrier(4)

    def worker(i):
        tids[i] = threading.get_native_id()
        barrier.wait()  # all four threads alive at once: four distinct thread ids
        with record_function(f"worker_{i}"):
            for _ in range(3):
                with record_function("chunk"):
                    sum(range(100))

    with profiler.profile() as p:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with record_function("main"):
            pass

    events = p.events()
    for i in range(4):
        (outer,) = [e for e in events if e.name == f"worker_{i}"]
        assert outer.thread == tids[i]
        assert [c.name for c in outer.cpu_children] == ["chunk"] * 3
        assert {c.thread for c in outer.cpu_children} == {tids[i]}
    (main,) = [e for e in events if e.name == "main"]
    assert main.thread == threading.get_native_id()
    assert len(set(tids.values()) | {main.thread}) == 5

    trace = trace_of(p)
    for i in range(4):
        (outer,) = complete_events(trace, f"worker_{i}")
        assert outer["tid"] == tids[i]
        chunks = [c for c in complete_events(trace, "chunk") if c["tid"] == tids[i]]
        assert len(chunks) == 3 and all(encloses(outer, c) for c in chunks)
    assert p.key_averages()  # aggregated across threads
    assert {row.key: row.count for row in p.key_averages()}["chunk"] == 12


def test_cpp_threads_land_in_the_same_session():
    with profiler.profile() as p:
        native_tids = _C._run_native_threads(3, "native_outer", "native_inner", 5)
    assert len(set(native_tids)) == 3
    events = p.events()
    outers = [e for e in events if e.name == "native_outer"]
    assert sorted(e.thread for e in outers) == sorted(native_tids)
    for outer in outers:
        assert [c.name for c in outer.cpu_children] == ["native_inner"] * 5
        assert outer.scope_name == "USER_SCOPE"
        assert outer.cpu_children[0].scope_name == "FUNCTION"


def test_threads_keep_recording_while_the_profiler_exports(tmp_path):
    # Each window ends in on_trace_ready, which exports: the stepping thread goes in and out
    # of the native profiler with the GIL released and taken back, while worker threads
    # record all along. A GIL mistake shows up here as a hang or a crash.
    stop = threading.Event()
    counts = [0, 0]

    def worker(i):
        while not stop.is_set():
            with record_function(f"busy_{i}"):
                counts[i] += 1

    exported = []

    def on_trace_ready(prof):
        path = tmp_path / f"w{len(exported)}.json"
        prof.export_chrome_trace(str(path))
        prof.key_averages().table()
        exported.append(path)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    try:
        with profiler.profile(
            schedule=profiler.schedule(wait=0, warmup=1, active=1), on_trace_ready=on_trace_ready
        ) as p:
            for _ in range(10):
                with record_function("step_work"):
                    time.sleep(0.02)  # lets the workers run, inside the window
                p.step()
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert len(exported) == 5 and all(path.exists() for path in exported)
    assert counts[0] > 0 and counts[1] > 0
    # Each exported window holds its step's work and both workers' ranges.
    from conftest import load_trace

    seen = set()
    for path in exported:
        names = {e["name"] for e in load_trace(path)["traceEvents"]}
        assert "step_work" in names
        seen |= names
    assert {"busy_0", "busy_1"} <= seen


def test_record_all_threads_false_records_only_the_starting_thread():
    config = profiler.ExperimentalConfig(record_all_threads=False)

    def worker():
        with record_function("other_thread"):
            pass

    with profiler.profile(experimental_config=config) as p:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with record_function("this_thread"):
            pass
    names = {e.name for e in p.events()}
    assert "this_thread" in names and "other_thread" not in names
