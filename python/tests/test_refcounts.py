"""record_function keeps no reference it should not, in and out of a session."""

import gc
import sys
import tracemalloc

import opscope.profiler as profiler
from opscope.profiler import record_function


def run(n, name, args):
    for _ in range(n):
        with record_function(name, args):
            pass


def test_no_references_leak_across_100k_uses():
    name = "".join(["leak", "_check"])  # a fresh str, not an interned constant
    args = "".join(["a=", "1"])
    before = (sys.getrefcount(name), sys.getrefcount(args))
    run(100_000, name, args)
    with profiler.profile(record_shapes=True):
        run(100_000, name, args)
    gc.collect()
    assert (sys.getrefcount(name), sys.getrefcount(args)) == before


def test_no_memory_grows_without_a_session():
    run(1000, "warm", None)
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        run(100_000, "steady", "x")
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One leaked object per use would be megabytes.
    assert end - start < 64 * 1024


def test_decorated_function_keeps_its_identity_and_releases_arguments():
    @record_function("decorated")
    def work(x):
        return x

    payload = object()
    before = sys.getrefcount(payload)
    for _ in range(1000):
        assert work(payload) is payload
    assert sys.getrefcount(payload) == before
