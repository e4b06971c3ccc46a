"""opscope.profiler against torch.profiler itself, side by side: torch 1.13 (Debian 12's
python3-torch, on the host) and torch 2.6 (Debian 13's, in scripts/debian-root trixie).

Each test runs one workload under torch and under opscope, with only the import changed, and
compares what a torch user sees: which ranges exist and their names, the attributes of the
result objects (names taken from torch's own instances) and their types, tables, warnings and
errors, the steps on_trace_ready fires at, and torch.autograd.profiler's older API. Where
torch 2.x and 1.13 differ, opscope follows 2.x (TORCH2 below picks what torch is expected to
do). Where opscope deliberately differs, the test names the difference and asserts it. torch
records its own operators (aten::zeros, ... at start); comparisons are over the ranges the
workload makes.
"""

import re
import warnings

import pytest

import opscope.autograd.profiler as our_autograd
import opscope.profiler as ours

torch = pytest.importorskip("torch", reason="PyTorch (Debian: python3-torch) is not installed")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
theirs = torch.profiler
their_autograd = torch.autograd.profiler

USER_RANGES = {"outer", "inner", "solo"}


def workload(record_function):
    for _ in range(3):
        with record_function("outer"):
            with record_function("inner"):
                sum(i * i for i in range(500))
    with record_function("solo"):
        pass


def profiled(module, **kwargs):
    with module.profile(**kwargs) as p:
        workload(module.record_function)
    return p


def stepped(module, steps=5):
    """A profile with a schedule: windows of steps 1-2, then 4; the last window is kept."""
    fired = []
    with module.profile(schedule=module.schedule(wait=0, warmup=1, active=2),
                        on_trace_ready=lambda p: fired.append(p.step_num)) as p:
        for _ in range(steps):
            workload(module.record_function)
            p.step()
    return p, fired


def user_names(events):
    return sorted({e.name for e in events} & USER_RANGES)


def public_attributes(obj):
    return {name for name in dir(obj) if not name.startswith("_")}


def kind(value):
    """A value's type as a torch user meets it: the class name (torch's DeviceType and
    Interval live in other modules than opscope's, with the same names and members)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    return type(value).__name__


# Deliberate difference: torch 1.13 keeps event times in whole microseconds (ints), torch 2.x
# its device times; opscope keeps nanoseconds, so these are floats with three decimals.
FINER_TIMES = {"cpu_time_total", "self_cpu_time_total", "cuda_time_total", "self_cuda_time_total",
               "device_time_total", "self_device_time_total"}


def same_kind(name, t_value, o_value):
    if name in FINER_TIMES and kind(t_value) == "int":
        return kind(o_value) == "float"
    return kind(o_value) == kind(t_value)


def by_name(events, name):
    return next(e for e in events if e.name == name)


# -- ranges and their names ---------------------------------------------------------------------


def test_without_a_schedule_there_are_no_step_ranges():
    for module in (theirs, ours):
        p = profiled(module)
        names = {e.name for e in p.events()}
        assert not any(n.startswith("ProfilerStep") for n in names), (module.__name__, names)
        assert user_names(p.events()) == ["inner", "outer", "solo"]
        # The user's ranges are the top level, not a step range.
        tops = {e.name for e in p.events() if e.cpu_parent is None} & USER_RANGES
        assert tops == {"outer", "solo"}, module.__name__


def test_an_empty_window_has_an_empty_table():
    for module in (theirs, ours):
        with module.profile() as p:
            pass
        assert p.key_averages().table() == "", module.__name__


def test_step_ranges_are_averaged_as_profiler_step_star():
    def windows(module):
        seen = []

        def ready(p):
            assert "ProfilerStep*" in {e.name for e in p.events()}
            assert "ProfilerStep*" in {r.key for r in p.key_averages()}
            assert not any(r.key.startswith("ProfilerStep#") for r in p.key_averages())
            # The number stays in trace_name (and in the Chrome trace).
            numbers = sorted(int(e.trace_name.split("#")[1]) for e in p.events()
                             if e.name == "ProfilerStep*")
            seen.append((p.step_num, numbers))

        with module.profile(schedule=module.schedule(wait=0, warmup=1, active=2),
                            on_trace_ready=ready) as p:
            for _ in range(6):
                workload(module.record_function)
                p.step()
        return seen

    t_windows, o_windows = windows(theirs), windows(ours)
    assert [s for s, _ in o_windows] == [s for s, _ in t_windows] == [3, 6]
    # opscope names each step range after the step it covers (the window of steps 1-2 holds
    # ProfilerStep#1 and #2), as torch 2.x does. torch 1.13 named the range that step() opens
    # after the step that just ended, so ProfilerStep#0 occurred twice and every later number
    # was one less.
    assert [n for _, n in o_windows] == [[1, 2], [4, 5]]
    assert [n for _, n in t_windows] == ([[1, 2], [4, 5]] if TORCH2 else [[0, 1], [3, 4]])


@pytest.mark.parametrize("schedule", [dict(wait=1, warmup=1, active=2, repeat=2),
                                      dict(wait=0, warmup=2, active=1, skip_first=1)])
def test_on_trace_ready_fires_at_the_same_steps(schedule):
    def fired(module):
        steps = []
        with module.profile(schedule=module.schedule(**schedule),
                            on_trace_ready=lambda p: steps.append(p.step_num)) as p:
            for _ in range(9):
                p.step()
        return steps

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fired(ours) == fired(theirs)


# -- the result objects -------------------------------------------------------------------------


def test_events_and_averages_are_lists_with_torchs_methods():
    tp, op = profiled(theirs), profiled(ours)
    for t_list, o_list in ((tp.events(), op.events()), (tp.key_averages(), op.key_averages())):
        assert isinstance(o_list, list)
        missing = public_attributes(t_list) - public_attributes(o_list)
        assert not missing, f"EventList lacks {sorted(missing)}"
        assert isinstance(o_list[:2], list) and len(o_list[:2]) == 2
        assert isinstance(o_list.self_cpu_time_total, float)
        assert o_list.total_average().key == t_list.total_average().key == "Total"
        o_metrics = o_list.supported_export_stacks_metrics()
        t_metrics = t_list.supported_export_stacks_metrics()
        # Deliberate difference: torch 2.x also lists XPU and PrivateUse1 device time; opscope
        # records neither device, so it offers only the metrics it can fill.
        assert set(t_metrics) - set(o_metrics) == (
            {"self_xpu_time_total", "self_privateuse1_time_total"} if TORCH2 else set())
        assert o_metrics == [m for m in t_metrics if m in o_metrics]


def test_function_event_has_torchs_attributes_with_torchs_types():
    tp, op = profiled(theirs, record_shapes=True), profiled(ours, record_shapes=True)
    t_event, o_event = by_name(tp.events(), "inner"), by_name(op.events(), "inner")
    missing = public_attributes(t_event) - public_attributes(o_event)
    # Deliberate difference: opscope's FunctionEvent is a read-only view of the recorded
    # window; torch's tree-building mutators are not there.
    assert missing == {"append_cpu_child", "append_kernel", "set_cpu_parent"}
    for name in sorted(public_attributes(t_event)):
        t_value = getattr(t_event, name)
        if callable(t_value):
            continue
        o_value = getattr(o_event, name)
        # torch's id is a small counter, opscope's the range handle: both ints.
        assert same_kind(name, t_value, o_value), f"{name}: torch {t_value!r}, opscope {o_value!r}"
    assert str(o_event.device_type) == str(t_event.device_type) == "DeviceType.CPU"
    assert o_event.cpu_parent.name == t_event.cpu_parent.name == "outer"
    assert o_event.time_range.elapsed_us() == pytest.approx(o_event.cpu_time_total)
    assert re.fullmatch(r"\d+\.\d{3}(us|ms|s)", o_event.cpu_time_total_str)
    # No GPU here: no kernels, nothing timed the legacy way; kernels are torch's Kernel tuples.
    assert o_event.kernels == t_event.kernels == []
    assert o_event.is_legacy is False
    from torch.autograd.profiler_util import Kernel as TheirKernel

    from opscope.profiler_util import Kernel as OurKernel
    assert OurKernel._fields == TheirKernel._fields


def test_function_event_avg_has_torchs_attributes_with_torchs_types():
    tp, op = profiled(theirs), profiled(ours)
    t_row = next(r for r in tp.key_averages() if r.key == "inner")
    o_row = next(r for r in op.key_averages() if r.key == "inner")
    missing = public_attributes(t_row) - public_attributes(o_row)
    assert not missing, f"FunctionEventAvg lacks {sorted(missing)}"
    for name in sorted(public_attributes(t_row)):
        t_value = getattr(t_row, name)
        if callable(t_value):
            continue
        o_value = getattr(o_row, name)
        assert same_kind(name, t_value, o_value), f"{name}: torch {t_value!r}, opscope {o_value!r}"
    assert o_row.count == t_row.count == 3
    # As torch's, an average carries the tree and scope of its first event.
    for t_avg, o_avg in ((t_row, o_row), *(
            (next(r for r in tp.key_averages() if r.key == k),
             next(r for r in op.key_averages() if r.key == k)) for k in ("outer", "solo"))):
        t_parent, o_parent = t_avg.cpu_parent, o_avg.cpu_parent
        assert (o_parent and o_parent.name) == (t_parent and t_parent.name), t_avg.key
        assert user_names(o_avg.cpu_children) == user_names(t_avg.cpu_children), t_avg.key
        assert o_avg.scope == t_avg.scope == by_name(op.events(), t_avg.key).scope
    assert o_row.cpu_parent.name == "outer" and user_names(
        next(r for r in op.key_averages() if r.key == "outer").cpu_children) == ["inner"]
    # The tree is the first event's: its parent is the first "outer".
    assert o_row.cpu_parent.id == by_name(op.events(), "outer").id
    # torch 2's self_cpu_percent_total: the key's share of the self time, as "Self CPU %".
    shares = [r.self_cpu_percent_total for r in op.key_averages()]
    assert sum(shares) == pytest.approx(100.0) and all(s >= 0 for s in shares)
    # add() accumulates as torch's does.
    total = next(r for r in op.key_averages() if r.key == "outer")
    total.add(o_row)
    assert total.count == 6 and total.key == "outer"


@pytest.mark.parametrize("grouping", [dict(group_by_input_shape=True), dict(group_by_stack_n=2)])
def test_grouped_averages_carry_their_first_events_tree(grouping):
    options = dict(record_shapes=True, with_stack=True)
    tp, op = profiled(theirs, **options), profiled(ours, **options)
    for p in (tp, op):
        rows = {r.key: r for r in p.key_averages(**grouping) if r.key in USER_RANGES}
        assert rows["inner"].cpu_parent.name == "outer"
        assert rows["outer"].cpu_parent is None and rows["solo"].cpu_parent is None
        assert user_names(rows["outer"].cpu_children) == ["inner"]
        # total_average() keeps the last item's tree and scope (torch's clears its key after
        # each add, so every add hands them over).
        averages = p.key_averages(**grouping)
        assert averages.total_average().scope == averages[-1].scope
        last_parent = p.events()[-1].cpu_parent
        total_parent = p.events().total_average().cpu_parent
        assert (total_parent and total_parent.id) == (last_parent and last_parent.id)


def test_tables_have_torchs_layout_sorting_and_total():
    tp, op = profiled(theirs), profiled(ours)
    for sort_by in ("count", "cpu_time_total"):
        t_table = tp.key_averages().table(sort_by=sort_by)
        o_table = op.key_averages().table(sort_by=sort_by)
        t_lines, o_lines = t_table.splitlines(), o_table.splitlines()
        assert o_lines[1].split() == t_lines[1].split()  # the header
        assert o_lines[-1].startswith("Self CPU time total: ")
        assert t_lines[-1].startswith("Self CPU time total: ")

        def order(lines):
            return [line.split()[0] for line in lines[3:-2] if line.split()[0] in USER_RANGES]

        if sort_by == "count":  # deterministic: solo (1) after outer and inner (3 each)
            assert order(o_lines) == order(t_lines) == ["outer", "inner", "solo"]
    # events().table() is a table of single events, as torch's.
    assert op.events().table().count(" inner ") == tp.events().table().count(" inner ") == 3


# -- warnings and errors ------------------------------------------------------------------------


def test_invalid_schedule_raises_torchs_assertion_error():
    for module in (theirs, ours):
        with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
            module.schedule(wait=-1, warmup=0, active=1)
        with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
            module.schedule(wait=0, warmup=0, active=0)
    # Deliberate difference: opscope's message names the argument, and it is a ValueError too.
    with pytest.raises(ValueError, match="active=0"):
        ours.schedule(wait=0, warmup=0, active=0)


def test_a_second_profile_raises_runtime_error():
    for module in (theirs, ours):
        with pytest.raises(RuntimeError):
            with module.profile():
                with module.profile():
                    pass


def test_use_cuda_warns_that_it_is_deprecated():
    # opscope warns as torch 2.x does: a FutureWarning. torch 1.13 warned a UserWarning,
    # "use_cuda is deprecated, use activities argument instead".
    modern = (FutureWarning, r"`use_cuda` is deprecated, use `activities` argument instead")
    for module, (category, message) in (
            (ours, modern),
            (theirs, modern if TORCH2 else
             (UserWarning, "use_cuda is deprecated, use activities"))):
        with pytest.warns(category, match=message):
            module.profile(use_cuda=False)


# -- torch.autograd.profiler ---------------------------------------------------------------------


def test_autograd_profiler_has_torchs_names():
    for name in ("profile", "record_function", "emit_nvtx", "emit_itt", "EventList"):
        assert hasattr(our_autograd, name), name
    missing = public_attributes(their_autograd.profile) - public_attributes(our_autograd.profile)
    # Deliberate difference: config() builds torch's internal ProfilerConfig; opscope has none.
    # Not yet in opscope: torch 2.x's trace ids (create_trace_id, default_trace_id: opscope's
    # traces have no "trace_id") and toggle_collection_dynamic (switching activities off and on
    # inside a window).
    assert missing == ({"config", "create_trace_id", "default_trace_id",
                        "toggle_collection_dynamic"} if TORCH2 else {"config"})


def test_autograd_profile_records_and_summarizes():
    results = []
    for module in (their_autograd, our_autograd):
        with module.profile(record_shapes=True) as p:
            workload(module.record_function)
        results.append(p)
        assert user_names(p.function_events) == ["inner", "outer", "solo"]
        assert p.total_average().key == "Total"
        assert p.self_cpu_time_total > 0
        assert "Self CPU time total" in p.table(sort_by="count")
        unfinished = module.profile()
        if module is our_autograd or TORCH2:
            # As torch 2.x: an unfinished profile's summaries are empty.
            assert unfinished.table() == "" and list(unfinished.function_events) == []
            assert unfinished.total_average().count == 0
        else:  # torch 1.13 raised
            with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
                unfinished.table()
    t_row, o_row = (next(r for r in p.key_averages() if r.key == "outer") for p in results)
    assert o_row.count == t_row.count == 3


def test_autograd_use_cuda_without_cuda_warns_as_torch():
    for module in (their_autograd, our_autograd):
        with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
            with module.profile(use_cuda=True):
                pass


def test_autograd_use_cuda_says_why_and_times_ranges_where_it_can(monkeypatch):
    import opscope._C as our_C

    reason = our_C.cuda_event_timing_unavailable_reason()
    assert reason  # no GPU here
    with pytest.warns(UserWarning) as caught:
        with our_autograd.profile(use_cuda=True) as p:
            pass
    assert any(reason in str(w.message) for w in caught)
    assert p.use_cuda is False

    # Where it can, use_cuda asks the session for what torch 1.13 uses: CUPTI with
    # use_kineto=True where CUDA is recordable, CUDA events otherwise.
    asked = []
    real_profile = ours.profile

    def spy(*args, **kwargs):
        config = kwargs["experimental_config"]
        asked.append((set(kwargs["activities"]), bool(config and config.cuda_event_timing)))
        return real_profile(*args, **kwargs)

    monkeypatch.setattr(ours, "profile", spy)
    monkeypatch.setattr(ours, "supported_activities",
                        lambda: {ours.ProfilerActivity.CPU, ours.ProfilerActivity.CUDA})
    monkeypatch.setattr(our_C, "cuda_event_timing_unavailable_reason", lambda: "")
    given = ours.ExperimentalConfig(verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the session's own: accepted, not recorded here
        for use_kineto in (True, False):
            with our_autograd.profile(use_cuda=True, use_kineto=use_kineto,
                                      experimental_config=given) as p:
                pass
            assert p.use_cuda is True
    cpu, cuda = ours.ProfilerActivity.CPU, ours.ProfilerActivity.CUDA
    assert asked == [({cpu, cuda}, False), ({cpu}, True)]
    assert given.cuda_event_timing is False  # the caller's config is left as it was


def test_emit_itt_and_emit_nvtx_without_the_tools():
    for module in (their_autograd, our_autograd):
        with pytest.raises(RuntimeError, match="Can't use ITT profiler"):
            with module.emit_itt():
                pass
    # Deliberate difference: without CUDA torch fails an assertion ("Torch not compiled with
    # CUDA enabled"); opscope raises RuntimeError saying what it could not find.
    with pytest.raises(AssertionError):
        with their_autograd.emit_nvtx():
            pass
    with pytest.raises(RuntimeError, match="Can't use NVTX profiler: .*CUDA"):
        with our_autograd.emit_nvtx():
            pass
    # Disabled, both are no-ops.
    for module in (their_autograd, our_autograd):
        with module.emit_nvtx(enabled=False), module.emit_itt(enabled=False):
            pass


def test_prof_profiler_is_the_autograd_profile_of_the_last_window():
    tp, op = profiled(theirs), profiled(ours)
    assert type(op.profiler).__name__ == type(tp.profiler).__name__ == "profile"
    assert user_names(op.profiler.function_events) == user_names(tp.profiler.function_events)


def test_experimental_config_verbose_drops_the_call_stack(tmp_path):
    def call_stacks(module, verbose):
        with module.profile(with_stack=True,
                            experimental_config=module._ExperimentalConfig(verbose=verbose)) as p:
            workload(module.record_function)
        path = tmp_path / f"{module.__name__}-{verbose}.json"
        p.export_chrome_trace(str(path))
        import json

        doc = json.loads(path.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc  # torch: either form
        return sum(1 for e in events
                   if e.get("name") == "inner" and "Call stack" in e.get("args", {}))

    # Both take the argument; opscope's traces follow verbose as Kineto's do (torch 2.6 in
    # Debian 13). Debian's torch 1.13 is built without Kineto, so its traces are the legacy
    # list with no "Call stack" at all.
    assert call_stacks(ours, True) == (call_stacks(theirs, True) if TORCH2 else 3) == 3
    assert call_stacks(ours, False) == call_stacks(theirs, False) == 0
