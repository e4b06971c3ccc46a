"""Shared helpers for the opscope Python tests.

The suite runs against the package laid out in the build tree (ctest sets PYTHONPATH to
<build>/python); run it by hand with
    PYTHONPATH=build-py/python /usr/bin/python3 -m pytest -q python/tests
"""

import gzip
import json

import pytest

import opscope.profiler as profiler


def load_trace(path):
    """The Chrome trace at `path` (.json or .json.gz) as a dict."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def complete_events(trace, name=None):
    """The trace's complete ("X") events, optionally only those called `name`."""
    return [
        e
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and (name is None or e["name"] == name)
    ]


def encloses(outer, inner):
    """True when Chrome event `outer` holds `inner` in time (same thread)."""
    return (
        outer["tid"] == inner["tid"]
        and outer["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )


@pytest.fixture
def trace_of(tmp_path):
    """Exports a profile's last window to a file and returns the parsed trace."""

    def export(prof, name="trace.json"):
        path = tmp_path / name
        prof.export_chrome_trace(str(path))
        return load_trace(path)

    return export


@pytest.fixture(autouse=True)
def no_profiler_left_running():
    """A test that leaves a profile running would make every later start() fail; fail it
    here instead, where the culprit is named."""
    yield
    probe = profiler.profile()
    try:
        probe.start()
    except RuntimeError as e:  # pragma: no cover - only on a broken test
        pytest.fail(f"a profile was left running: {e}")
    probe.stop()
