"""opscope's Chrome trace against a real Kineto trace (torch 2.x's torch.profiler), by layout.

The same workload runs under torch.profiler and under opscope.profiler with the same options;
both export a Chrome trace, and the two are compared as a trace reader (Perfetto, HTA, the
TensorBoard plugin) meets them: the top-level keys and their types, the metadata events, the
phases and categories of the events the workload makes, each category's args keys, and the
time units. Values differ (ids, times); the layout must not, except where listed in
DIFFERENCES with the reason. torch records its own operators (cpu_op) and, with with_stack,
every Python call (python_function); opscope records neither for a workload of
record_function ranges, so those categories are compared only where both have them.

Debian's torch 1.13 (the host) is built without Kineto, so there these tests skip; the Debian 13
root (scripts/debian-root trixie) has torch 2.6 with Kineto.
"""

import json
import time

import pytest

import opscope.profiler as ours

torch = pytest.importorskip("torch", reason="PyTorch (Debian: python3-torch) is not installed")
if not torch.autograd.kineto_available():
    pytest.skip(f"torch {torch.__version__} is built without Kineto: no Kineto trace to compare "
                "with (Debian 13's python3-torch 2.6 has it: scripts/debian-root trixie)",
                allow_module_level=True)
theirs = torch.profiler

LENSES = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")

# What differs, by design or not yet done, and why. Each entry is asserted to be exactly so,
# so a change on either side shows here.
DIFFERENCES = {
    "top-level keys only torch has": set(),
    # opscope's own record of the session (version, events dropped, lenses): readers ignore
    # unknown top-level keys.
    "top-level keys only opscope has": {"opscope"},
    "metadata only torch has": set(),
    # Kineto's index of the event in its own buffer ("Ev Idx"): no analysis needs it (HTA reads
    # it, when asked, into a column that defaults to -1), and it would cost every range of
    # every export.
    "user_annotation args only torch has": {"Ev Idx"},
    "[memory] args only torch has": {"Ev Idx"},
}
# With with_stack, torch 2.x records every Python call as a python_function event and no longer
# writes "Call stack" on ranges; opscope samples the stack at each range's start and keeps it
# on the range as "Call stack" (as Kineto did before 2.0), a cost per range instead of per
# Python call.
STACK_DIFFERENCES = {"user_annotation args only opscope has": {"Call stack"}}
# Kineto's own spans: the profiler's window ("Trace", pid "Spans") and its iteration instants.
KINETO_SPANS = {("X", "Trace"), ("i", None)}


def workload(module):
    data = []
    for _ in range(3):
        with module.record_function("outer"):
            with module.record_function("inner"):
                # Memory both see under profile_memory: torch its tensor's, opscope the
                # Python allocator's.
                data.append((torch.ones(64, 64), bytearray(1 << 16)))
                sum(i * i for i in range(200))
    with module.record_function("solo"):
        pass


def trace(module, tmp_path, options):
    with module.profile(activities=[module.ProfilerActivity.CPU], **options) as p:
        workload(module)
    path = tmp_path / f"{module.__name__}.json"
    p.export_chrome_trace(str(path))
    return json.loads(path.read_text()), str(path)


def category(event):
    return (event.get("ph"), event.get("cat"))


def layout(doc):
    """The shape of a trace: top-level key -> type; metadata name -> args keys; per category
    (phase, cat), the event keys and the args keys with their types."""
    top = {k: type(v).__name__ for k, v in doc.items() if k != "traceEvents"}
    metadata, categories = {}, {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            metadata.setdefault(e["name"], set()).update(e.get("args", {}))
            continue
        c = categories.setdefault(category(e), {"keys": set(), "args": {}})
        c["keys"].update(e)
        for k, v in e.get("args", {}).items():
            c["args"].setdefault(k, type(v).__name__)
    return top, metadata, categories


def user_events(doc, names=("outer", "inner", "solo")):
    return [e for e in doc["traceEvents"] if e.get("name") in names and e.get("ph") == "X"]


@pytest.mark.parametrize("lenses", [(), LENSES], ids=["no lenses", "all lenses"])
def test_chrome_trace_layout_is_kinetos(tmp_path, lenses, request):
    options = {lens: True for lens in lenses}
    t_doc, t_path = trace(theirs, tmp_path, options)
    o_doc, o_path = trace(ours, tmp_path, options)
    t_top, t_meta, t_cats = layout(t_doc)
    o_top, o_meta, o_cats = layout(o_doc)
    expected = dict(DIFFERENCES, **(STACK_DIFFERENCES if "with_stack" in lenses else {}))

    # Top level: the same keys with the same types, the lens flags with the same values.
    assert set(t_top) - set(o_top) == expected["top-level keys only torch has"]
    assert set(o_top) - set(t_top) == expected["top-level keys only opscope has"]
    for key in set(t_top) & set(o_top):
        assert o_top[key] == t_top[key], f"{key}: torch {t_top[key]}, opscope {o_top[key]}"
    for key in ("schemaVersion", "displayTimeUnit", *lenses):
        assert o_doc[key] == t_doc[key], key
    assert (t_doc["traceName"], o_doc["traceName"]) == (t_path, o_path)
    assert o_doc["deviceProperties"] == t_doc["deviceProperties"] == []  # CPU only

    # Metadata events: the same names with the same args keys.
    assert set(t_meta) - set(o_meta) == expected["metadata only torch has"]
    assert set(o_meta) <= set(t_meta)
    for name in o_meta:
        assert o_meta[name] == t_meta[name], name

    # The workload's ranges: complete events of category user_annotation in both, with the
    # same event keys; args keys the same but for the differences listed.
    assert category(user_events(o_doc)[0]) == category(user_events(t_doc)[0]) == \
        ("X", "user_annotation")
    assert sorted(e["name"] for e in user_events(o_doc)) == \
        sorted(e["name"] for e in user_events(t_doc))
    t_ann, o_ann = t_cats[("X", "user_annotation")], o_cats[("X", "user_annotation")]
    assert o_ann["keys"] == t_ann["keys"]
    assert set(t_ann["args"]) - set(o_ann["args"]) == \
        expected["user_annotation args only torch has"]
    assert set(o_ann["args"]) - set(t_ann["args"]) == \
        expected.get("user_annotation args only opscope has", set())
    for key in set(t_ann["args"]) & set(o_ann["args"]):
        assert o_ann["args"][key] == t_ann["args"][key], key

    # Every category opscope writes is one Kineto writes, with the same event keys.
    assert set(o_cats) <= set(t_cats), set(o_cats) - set(t_cats)
    for c in o_cats:
        assert o_cats[c]["keys"] == t_cats[c]["keys"], c
    assert KINETO_SPANS <= set(t_cats) and not KINETO_SPANS & set(o_cats)

    # profile_memory: "[memory]" instant events with Kineto's args (torch's from its tensors'
    # allocator, opscope's from the Python allocator: both see the workload's buffers).
    memory = ("i", "cpu_instant_event")
    if "profile_memory" in lenses:
        t_mem, o_mem = t_cats[memory], o_cats[memory]
        assert set(t_mem["args"]) - set(o_mem["args"]) == expected["[memory] args only torch has"]
        assert set(o_mem["args"]) <= set(t_mem["args"])
        for key in o_mem["args"]:
            assert o_mem["args"][key] == t_mem["args"][key], key
        names = {e["name"] for e in o_doc["traceEvents"] if category(e) == memory}
        assert names == {"[memory]"}

    # Units: ts and dur in microseconds with nanosecond fractions; ts plus baseTimeNanoseconds
    # is the wall-clock time in both (Kineto counts ts from a rounded base, opscope from the
    # window's start).
    now_ns = time.time_ns()
    for doc in (t_doc, o_doc):
        for e in user_events(doc):
            assert isinstance(e["ts"], float) or isinstance(e["ts"], int)
            assert round(e["ts"] * 1000) == pytest.approx(e["ts"] * 1000, abs=1)
            wall_ns = doc["baseTimeNanoseconds"] + e["ts"] * 1000
            assert abs(now_ns - wall_ns) < 120e9, (doc is o_doc, e)
        assert all(e["dur"] >= 0 for e in user_events(doc))
