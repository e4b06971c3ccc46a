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
