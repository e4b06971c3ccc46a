"""The two ways opscope reads Python frames (python/src/python_frames.cpp).

The public walk (PyThreadState_GetFrame, PyFrame_GetBack, ...) runs on every CPython. The
internal walk reads CPython 3.11's own frame list and is built only there; these tests are what
keeps it: on 3.11 both walks must give the same frames, and the stack and traceback tests pass
through each.
"""

import os
import subprocess
import sys
import traceback

import pytest

import opscope._C as _C
import opscope.profiler as profiler
import opscope.traceback as otb

HERE = os.path.dirname(os.path.abspath(__file__))
INTERNAL = sys.version_info[:2] == (3, 11)


def frames_of(summary):
    return [(f.filename, f.lineno, f.name) for f in summary]


@pytest.fixture
def walk():
    """Restores the walk the module loaded with after the test."""
    before = _C._frame_walk()
    yield
    _C._frame_walk(before)


def test_the_internal_walk_is_built_only_where_a_test_proves_it(walk):
    expected = "internal" if INTERNAL and os.environ.get("OPSCOPE_PYTHON_FRAMES") != "public" \
        else "public"
    assert _C._frame_walk() == expected
    assert _C._frame_walk("public") == "public"
    if INTERNAL:
        assert _C._frame_walk("internal") == "internal"
    else:
        with pytest.raises(ValueError, match="only 3.11's"):
            _C._frame_walk("internal")
    with pytest.raises(ValueError, match="expected 'internal', 'public' or None, got 'fast'"):
        _C._frame_walk("fast")


def in_a_generator_inside_a_comprehension():
    def gen():
        yield [otb.capture() for _ in range(1)][0]
    return next(gen())


def deep(n):
    return otb.capture() if n == 0 else deep(n - 1)


def in_an_except_block():
    try:
        raise KeyError("pending")
    except KeyError:
        tb = otb.capture()
        # The handled exception is still the one being handled after the walk.
        assert sys.exc_info()[0] is KeyError
        return tb


@pytest.mark.parametrize("where", [in_a_generator_inside_a_comprehension, lambda: deep(300),
                                   in_an_except_block])
@pytest.mark.skipif(not INTERNAL, reason="one walk only: CPython %d.%d" % sys.version_info[:2])
def test_both_walks_give_the_same_frames(walk, where):
    def through(name):
        _C._frame_walk(name)
        return frames_of(where().summary())

    internal, public = through("internal"), through("public")  # one line: the same caller line
    assert public == internal
    assert len(public) > 3


@pytest.mark.parametrize("name", ["public", "internal"])
def test_each_walk_agrees_with_extract_stack(walk, name):
    if name == "internal" and not INTERNAL:
        pytest.skip("no internal walk on CPython %d.%d" % sys.version_info[:2])
    _C._frame_walk(name)
    tb, reference = otb.capture(), traceback.extract_stack()
    assert frames_of(tb.summary()) == frames_of(reference)


@pytest.mark.skipif(not INTERNAL, reason="the other walk is the only one here")
def test_the_stack_tests_pass_through_the_public_walk():
    # The whole stack and traceback suites again, in a process whose module loads with the
    # public walk (OPSCOPE_PYTHON_FRAMES=public), as on a CPython without an internal walk.
    env = dict(os.environ, OPSCOPE_PYTHON_FRAMES="public")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         os.path.join(HERE, "test_python_stacks.py"), os.path.join(HERE, "test_traceback.py"),
         os.path.join(HERE, "test_frame_walks.py") + "::test_the_internal_walk_is_built_only_where_a_test_proves_it"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def allocating_frame(depth, out):
    # A new frame per call, made into a frame object only when a walk asks for it: on the
    # public walk that allocation happens while the range's stack is being written.
    if depth:
        return allocating_frame(depth - 1, out)
    with profiler.record_function("in_new_frames"):
        out.append(bytearray(256))


@pytest.mark.parametrize("name", ["public", "internal"])
def test_stacks_with_memory_stay_whole_when_the_walk_allocates(walk, name):
    # The public walk makes frame objects, which allocates; with profile_memory those
    # allocations were recorded into the middle of the stack being written in place, and the
    # stack came back as garbage (on 3.13: a crash in stop()).
    if name == "internal" and not INTERNAL:
        pytest.skip("no internal walk on CPython %d.%d" % sys.version_info[:2])
    _C._frame_walk(name)
    kept = []
    with profiler.profile(profile_memory=True, with_stack=True) as p:
        for i in range(200):
            allocating_frame(i % 7 + 1, kept)
    ranges = [e for e in p.events() if e.name == "in_new_frames"]
    assert len(ranges) == 200
    for e in ranges:
        labels = [frame for frame in e.stack if "allocating_frame" in frame]
        assert len(labels) >= 2, e.stack
        assert all("test_frame_walks.py(" in frame for frame in labels), e.stack
