"""RecordFunctionFast: the C-level range type (python/src/record_function_fast.cpp)."""

import gc
import sys
import threading
import tracemalloc

import pytest

from conftest import complete_events, encloses
from opscope.profiler import RecordFunctionFast, profile


def names_of(prof):
    return [e.name for e in prof.events()]


def only(prof, name):
    found = [e for e in prof.events() if e.name == name]
    assert len(found) == 1, [e.name for e in prof.events()]
    return found[0]


# --- Arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [1, None, b"bytes", ["x"]])
def test_name_must_be_a_string(name):
    with pytest.raises(RuntimeError, match="^The name passed to RecordFunctionFast must be a string$"):
        RecordFunctionFast(name)


@pytest.mark.parametrize("values", [1, "ab", {"a": 1}, {1, 2}])
def test_input_values_must_be_a_list_or_tuple(values):
    with pytest.raises(RuntimeError, match="^input_values must be a list or tuple$"):
        RecordFunctionFast("op", values)
    with pytest.raises(RuntimeError, match="^input_values must be a list or tuple$"):
        RecordFunctionFast("op", input_values=values)


@pytest.mark.parametrize("values", [1, [("a", 1)], ("a",)])
def test_keyword_values_must_be_dict(values):
    with pytest.raises(RuntimeError, match="^keyword_values must be dict$"):
        RecordFunctionFast("op", None, values)
    with pytest.raises(RuntimeError, match="^keyword_values must be dict$"):
        RecordFunctionFast("op", keyword_values=values)


def test_argument_count_and_keywords():
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        RecordFunctionFast()
    with pytest.raises(TypeError, match="at most 3 arguments"):
        RecordFunctionFast("a", [], {}, 4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shapes'"):
        RecordFunctionFast("a", shapes=[])
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        RecordFunctionFast("a", name="b")
    # Every argument by keyword, and None for the optional ones.
    RecordFunctionFast(name="a", input_values=(1,), keyword_values={"k": 2})
    RecordFunctionFast("a", None, None)
    assert repr(RecordFunctionFast("a")) == "RecordFunctionFast('a')"


def test_is_a_native_type_not_a_subclassable_python_class():
    assert type(RecordFunctionFast) is type  # not pybind11's metaclass
    # C methods (pybind11's would be "instancemethod" wrappers).
    assert type(vars(RecordFunctionFast)["__enter__"]).__name__ == "method_descriptor"
    assert type(vars(RecordFunctionFast)["__exit__"]).__name__ == "method_descriptor"
    with pytest.raises(TypeError):

        class Sub(RecordFunctionFast):  # noqa: F841 - defining it is the test
            pass


# --- What is recorded ------------------------------------------------------------------------


def test_ranges_are_recorded_and_nest(trace_of):
    with profile() as prof:
        with RecordFunctionFast("outer"):
            with RecordFunctionFast("inner"):
                pass
            with RecordFunctionFast("inner2"):
                pass
    assert only(prof, "inner").cpu_parent.name == "outer"
    assert only(prof, "inner2").cpu_parent.name == "outer"
    trace = trace_of(prof)
    (outer,) = complete_events(trace, "outer")
    (inner,) = complete_events(trace, "inner")
    assert encloses(outer, inner)
    assert outer["cat"] == "cpu_op"  # RecordScope::kFunction, as PyTorch's RecordFunctionFast


def test_enter_returns_none_and_exit_does_not_swallow_exceptions():
    with profile() as prof:
        with pytest.raises(KeyError):
            with RecordFunctionFast("raises") as value:
                assert value is None
                raise KeyError("x")
    assert names_of(prof).count("raises") == 1


def test_an_object_entered_again_records_a_range_per_enter():
    rf = RecordFunctionFast("again")
    with profile() as prof:
        for _ in range(3):
            with rf:
                pass
        with rf:  # nested re-entry of the same object
            with rf:
                pass
    events = [e for e in prof.events() if e.name == "again"]
    assert len(events) == 5
    nested = [e for e in events if e.cpu_parent is not None and e.cpu_parent.name == "again"]
    assert len(nested) == 1


def test_no_session_records_nothing():
    rf = RecordFunctionFast("unseen")
    with rf:
        pass
    with RecordFunctionFast("unseen", [1, 2], {"k": 3}):
        pass
    with profile() as prof:
        with RecordFunctionFast("seen"):
            pass
    assert "unseen" not in names_of(prof)
    assert "seen" in names_of(prof)


def test_entered_before_the_session_exits_cleanly_during_it():
    rf = RecordFunctionFast("straddles")
    rf.__enter__()  # nobody listens: nothing is begun
    with profile() as prof:
        rf.__exit__(None, None, None)  # nothing to end
        with RecordFunctionFast("inside"):
            pass
    assert "straddles" not in names_of(prof)
    assert "inside" in names_of(prof)


def test_a_range_begun_in_a_session_ends_after_it_stopped():
    rf = RecordFunctionFast("outlives")
    prof = profile()
    prof.start()
    rf.__enter__()
    prof.stop()
    rf.__exit__(None, None, None)  # ends the range; the session is gone, nothing breaks
    with rf:  # and the object is usable again
        pass


def test_threads_record_their_own_ranges():
    barrier = threading.Barrier(4)

    def work(i):
        barrier.wait()
        for _ in range(10):
            with RecordFunctionFast(f"thread_{i}"):
                with RecordFunctionFast("leaf"):
                    pass

    with profile() as prof:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    events = list(prof.events())
    for i in range(4):
        mine = [e for e in events if e.name == f"thread_{i}"]
        assert len(mine) == 10
        assert len({e.thread for e in mine}) == 1
    leaves = [e for e in events if e.name == "leaf"]
    assert len(leaves) == 40
    for leaf in leaves:
        assert leaf.cpu_parent is not None and leaf.cpu_parent.name.startswith("thread_")
        assert leaf.cpu_parent.thread == leaf.thread


def test_one_object_shared_by_threads_ends_each_threads_own_range():
    rf = RecordFunctionFast("shared")
    entered = threading.Event()
    release = threading.Event()

    def other():
        with rf:
            entered.set()
            release.wait(10)

    with profile() as prof:
        t = threading.Thread(target=other)
        t.start()
        assert entered.wait(10)
        with rf:  # this thread's range on the same object, while the other's is open
            pass
        release.set()
        t.join()
    shared = [e for e in prof.events() if e.name == "shared"]
    assert len(shared) == 2
    assert len({e.thread for e in shared}) == 2
    main = [e for e in shared if e.thread == threading.get_native_id()]
    assert len(main) == 1 and main[0].cpu_time_total < 5_000_000  # not held open by the other


# --- Inputs ----------------------------------------------------------------------------------


class ArrayLike:
    shape = (4, 5)
    dtype = "float32"


def test_inputs_are_recorded_with_record_shapes():
    with profile(record_shapes=True) as prof:
        with RecordFunctionFast("with_inputs", [[2, 3], 1.5, "text", True, None, ArrayLike()],
                                {"alpha": 7, "dims": (8, 9)}):
            pass
    e = only(prof, "with_inputs")
    # Lists of ints and array-likes are shapes; the keyword values follow the positional ones.
    assert e.input_shapes == [[2, 3], [], [], [], [], [4, 5], [], [8, 9]]
    types = e.input_types
    assert types[5] == "float32"


def test_inputs_are_not_converted_without_record_shapes():
    class Exploding:
        @property
        def shape(self):  # pragma: no cover - must not be called
            raise AssertionError("inputs converted without record_shapes")

    with profile() as prof:
        with RecordFunctionFast("no_shapes", [Exploding()]):
            pass
    assert only(prof, "no_shapes").input_shapes == []


def test_inputs_that_cannot_be_typed_are_recorded_as_nothing():
    class Broken:
        @property
        def shape(self):
            raise ValueError("no shape")

    with profile(record_shapes=True) as prof:
        with RecordFunctionFast("odd", [Broken(), object(), 2**80, "\ud800"]):
            pass
    assert len(only(prof, "odd").input_shapes) == 4


# --- Reference counts and leaks -------------------------------------------------------------


def use_many(name, args, kwargs, n):
    for _ in range(n):
        with RecordFunctionFast(name, args, kwargs):
            pass
    rf = RecordFunctionFast(name, args, kwargs)
    for _ in range(n // 10):
        with rf:
            with rf:
                pass


@pytest.mark.parametrize("session", [None, dict(), dict(record_shapes=True, with_stack=True)])
def test_no_leaks_across_100k_uses(session):
    name = "".join(["leak", "_check"])  # not interned by the compiler: a count of its own
    args = [[2, 3], 1.0, "s", ArrayLike()]
    kwargs = {"k": (4, 5)}
    counts = [sys.getrefcount(o) for o in (name, args, kwargs, ArrayLike)]
    use_many(name, args, kwargs, 1000)  # warm caches (interned names, stack labels)
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        if session is None:
            use_many(name, args, kwargs, 100_000)
        else:
            prof = profile(**session)
            prof.start()
            try:
                use_many(name, args, kwargs, 100_000)
            finally:
                prof.stop()
            del prof
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(o) for o in (name, args, kwargs, ArrayLike)] == counts
    assert len(gc.get_objects()) - objects < 100
    assert grown < 64 * 1024, f"Python allocations grew by {grown} bytes over 100k uses"
