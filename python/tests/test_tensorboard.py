"""tensorboard_trace_handler: file names, one file per window, gzip."""

import os
import re
import socket

import opscope.profiler as profiler
from opscope.profiler import record_function

from conftest import complete_events, load_trace


def run(handler, windows):
    with profiler.profile(
        schedule=profiler.schedule(wait=1, warmup=1, active=2, repeat=windows),
        on_trace_ready=handler,
    ) as p:
        for step in range(4 * windows + 2):
            with record_function(f"step_body_{step}"):
                pass
            p.step()


def test_one_file_per_window_named_for_tensorboard(tmp_path):
    log = tmp_path / "log" / "nested"  # created by the handler
    run(profiler.tensorboard_trace_handler(str(log), worker_name="worker0"), windows=2)
    names = sorted(os.listdir(log))
    assert len(names) == 2
    stamps = []
    for name in names:
        m = re.fullmatch(r"worker0\.(\d+)\.pt\.trace\.json", name)
        assert m, name
        stamps.append(int(m.group(1)))
    assert stamps[0] < stamps[1]
    # Window 1 recorded steps 2 and 3, window 2 steps 6 and 7.
    bodies = [
        sorted(e["name"] for e in complete_events(load_trace(log / n)) if e["name"].startswith("step_body_"))
        for n in names
    ]
    assert bodies == [["step_body_2", "step_body_3"], ["step_body_6", "step_body_7"]]


def test_default_worker_name_and_gzip(tmp_path):
    run(profiler.tensorboard_trace_handler(str(tmp_path), use_gzip=True), windows=1)
    (name,) = os.listdir(tmp_path)
    worker = f"{socket.gethostname()}_{os.getpid()}"
    assert re.fullmatch(re.escape(worker) + r"\.\d+\.pt\.trace\.json\.gz", name), name
    trace = load_trace(tmp_path / name)
    assert complete_events(trace, "step_body_3")
