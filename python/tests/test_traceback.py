"""opscope.traceback: cheap Python stack captures (python/src/traceback.cpp)."""

import gc
import sys
import threading
import traceback
import weakref

import pytest

import opscope.traceback as otb


def frames_of(summary):
    return [(f.filename, f.lineno, f.name) for f in summary]


def capture_with_reference():
    # Both on one line, so that this frame's line agrees.
    tb, reference = otb.capture(), traceback.extract_stack()
    return tb, reference


def test_summary_matches_extract_stack():
    tb, reference = capture_with_reference()
    assert isinstance(tb, otb.CapturedTraceback)
    summary = tb.summary()
    assert isinstance(summary, traceback.StackSummary)
    assert frames_of(summary) == frames_of(reference)
    assert summary[-1].name == "capture_with_reference"
    assert summary[-2].name == "test_summary_matches_extract_stack"
    assert len(tb) == len(reference)


def test_format_matches_format_list():
    tb, reference = capture_with_reference()
    lines = tb.format()
    assert lines == traceback.format_list(reference)
    assert 'in capture_with_reference\n' in lines[-1]
    assert "otb.capture(), traceback.extract_stack()" in lines[-1]  # the source, read lazily


def test_limit_keeps_the_innermost_frames():
    def inner():
        return otb.capture(limit=2), otb.capture(1), otb.capture(0), otb.capture(None)

    two, one, zero, everything = inner()
    assert [f.name for f in two.summary()] == ["test_limit_keeps_the_innermost_frames", "inner"]
    assert [f.name for f in one.summary()] == ["inner"]
    assert len(zero) == 0 and zero.format() == []
    assert len(everything) > 2
    with pytest.raises(ValueError, match="limit must be None or >= 0"):
        otb.capture(-1)
    with pytest.raises(TypeError):
        otb.capture(depth=3)


def test_deep_stacks_are_captured_whole():
    def recurse(n):
        return otb.capture() if n == 0 else recurse(n - 1)

    tb = recurse(500)
    names = [f.name for f in tb.summary()]
    assert names.count("recurse") == 501


def test_other_threads_capture_their_own_stack():
    result = {}

    def thread_body():
        result["tb"] = otb.capture()

    t = threading.Thread(target=thread_body)
    t.start()
    t.join()
    names = [f.name for f in result["tb"].summary()]
    assert names[-1] == "thread_body"
    assert "test_other_threads_capture_their_own_stack" not in names


def test_repr():
    assert repr(otb.capture(limit=1)) == "<opscope.traceback.CapturedTraceback with 1 frames>"


class Payload:
    pass


def capture_while_holding(payload):
    local = payload  # noqa: F841 - the frame's local is what must not be kept alive
    return otb.capture()


def test_captures_do_not_keep_frames_or_their_locals_alive():
    payload = Payload()
    ref = weakref.ref(payload)
    tb = capture_while_holding(payload)
    del payload
    assert ref() is None, "the capture kept the frame (and its locals) alive"
    assert tb.summary()[-1].name == "capture_while_holding"  # still formats after the frame died


def test_code_objects_are_referenced_and_released():
    code = capture_while_holding.__code__
    before = sys.getrefcount(code)
    captures = [capture_while_holding(None) for _ in range(1000)]
    assert sys.getrefcount(code) == before + 1000
    del captures
    assert sys.getrefcount(code) == before


def test_a_cycle_through_a_capture_is_collected():
    class Holder:
        pass

    holder = Holder()
    holder.tb = otb.capture()
    holder.tb.owner = holder  # captures take attributes: holder -> tb -> holder
    ref = weakref.ref(holder)
    tb_ref = weakref.ref(holder.tb)
    del holder
    gc.collect()
    assert ref() is None and tb_ref() is None


def test_traverse_reports_code_objects_and_attributes():
    tb = otb.capture()
    tb.note = marker = object()
    referents = gc.get_referents(tb)
    assert test_traverse_reports_code_objects_and_attributes.__code__ in referents
    assert any(isinstance(r, dict) and r.get("note") is marker for r in referents)
    assert gc.is_tracked(tb)


def test_cannot_be_made_directly():
    with pytest.raises(TypeError):
        otb.CapturedTraceback()
