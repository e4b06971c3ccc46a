"""schedule(), ProfilerAction and the step transitions, against profiler.py's semantics."""

import warnings

import pytest

import opscope.profiler as profiler
from opscope.profiler import ProfilerAction


def reference_schedule(wait, warmup, active, repeat=0, skip_first=0):
    """torch.profiler.schedule's schedule_fn, transcribed from profiler.py."""

    def schedule_fn(step):
        assert step >= 0
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


# PyTorch 1.13's own output (../shared/reference/pytorch-1.13/schedule_actions.txt) for
# skip_first=1, wait=1, warmup=1, active=2, repeat=2.
PYTORCH_1_13_ACTIONS = (
    ["NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]
    + ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]
    + ["NONE"] * 5
)


def test_reference_case_matches_pytorch_1_13():
    s = profiler.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    assert [s(step).name for step in range(14)] == PYTORCH_1_13_ACTIONS


@pytest.mark.parametrize(
    "args",
    [
        dict(wait=1, warmup=1, active=2),
        dict(wait=1, warmup=1, active=2, repeat=1),
        dict(wait=1, warmup=1, active=2, repeat=3, skip_first=2),
        dict(wait=0, warmup=2, active=1, repeat=2),
        dict(wait=3, warmup=1, active=1, skip_first=5),
        dict(wait=2, warmup=1, active=4, repeat=1, skip_first=1),
    ],
)
def test_actions_match_profiler_py(args):
    ours = profiler.schedule(**args)
    theirs = reference_schedule(**args)
    assert [ours(step) for step in range(40)] == [theirs(step) for step in range(40)]


def test_actions_are_profiler_actions():
    s = profiler.schedule(wait=0, warmup=1, active=1)
    assert s(0) is ProfilerAction.WARMUP
    assert s(1) is ProfilerAction.RECORD_AND_SAVE
    assert [a.value for a in ProfilerAction] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "args, bad",
    [
        (dict(wait=-1, warmup=1, active=1), "wait=-1"),
        (dict(wait=0, warmup=-2, active=1), "warmup=-2"),
        (dict(wait=0, warmup=1, active=0), "active=0"),
        (dict(wait=0, warmup=1, active=1, repeat=-1), "repeat=-1"),
        (dict(wait=0, warmup=1, active=1, skip_first=-3), "skip_first=-3"),
    ],
)
def test_invalid_arguments_raise_value_error(args, bad):
    with pytest.raises(ValueError, match="^Invalid profiler schedule arguments: " + bad):
        profiler.schedule(**args)


def test_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        profiler.schedule(1, 1, 2)


def test_no_warmup_warns():
    with pytest.warns(UserWarning, match="Profiler won't be using warmup, this can skew profiler results"):
        profiler.schedule(wait=1, warmup=0, active=1)


def test_warmup_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profiler.schedule(wait=1, warmup=1, active=1)


def test_negative_step_is_refused():
    s = profiler.schedule(wait=0, warmup=1, active=1)
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        s(-1)


def run_steps(schedule, steps):
    """Runs `steps` steps under `schedule`; returns the step_num at each on_trace_ready and
    the ProfilerStep ranges each window holds."""
    fired = []

    def on_trace_ready(prof):
        names = sorted(
            {e.trace_name for e in prof.events() if e.name == "ProfilerStep*"},
            key=lambda n: int(n.split("#")[1]),
        )
        fired.append((prof.step_num, names))

    with profiler.profile(schedule=schedule, on_trace_ready=on_trace_ready) as p:
        for _ in range(steps):
            with profiler.record_function("work"):
                pass
            p.step()
    return fired


def test_reference_case_fires_where_pytorch_1_13_does():
    # ../shared/reference/pytorch-1.13/schedule_fired.txt: "skip_first=1 wait=1 warmup=1
    # active=2 repeat=2, 12 steps: on_trace_ready at step_num [5, 9]".
    s = profiler.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    fired = run_steps(s, 12)
    assert [step for step, _ in fired] == [5, 9]
    # Each window holds exactly its RECORD steps.
    assert [names for _, names in fired] == [
        ["ProfilerStep#3", "ProfilerStep#4"],
        ["ProfilerStep#7", "ProfilerStep#8"],
    ]


def test_python_callable_schedule_is_called_per_step():
    calls = []

    def my_schedule(step):
        calls.append(step)
        return ProfilerAction.RECORD_AND_SAVE if step % 3 == 2 else ProfilerAction.RECORD

    fired = run_steps(my_schedule, 6)
    assert calls == list(range(7))
    # Saved at the steps after 2 and 5, and once more at exit, step 6 being RECORD.
    assert [step for step, _ in fired] == [3, 6, 6]
    assert [names for _, names in fired] == [
        ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"],
        ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"],
        ["ProfilerStep#6"],
    ]


def test_schedule_may_return_ints():
    fired = run_steps(lambda step: 3 if step == 1 else 2, 3)
    assert [step for step, _ in fired] == [2, 3]


def test_exit_while_recording_fires_once_more():
    # Default schedule: every step records, nothing saves until stop; as in torch, steps are
    # ranges only when a schedule was given.
    fired = run_steps(None, 3)
    assert [step for step, _ in fired] == [3]
    assert fired[0][1] == []


def test_step_num_and_current_action():
    s = profiler.schedule(wait=1, warmup=1, active=2)
    p = profiler.profile(schedule=s)
    p.start()
    try:
        seen = [(p.step_num, p.current_action)]
        for _ in range(4):
            p.step()
            seen.append((p.step_num, p.current_action))
    finally:
        p.stop()
    assert seen == [(i, s(i)) for i in range(5)]


def test_incorrect_schedule_warns():
    actions = [ProfilerAction.RECORD, ProfilerAction.NONE, ProfilerAction.NONE]
    p = profiler.profile(schedule=lambda step: actions[min(step, 2)])
    p.start()
    with pytest.warns(UserWarning, match="Incorrect schedule: RECORD followed by NONE"):
        p.step()
    p.stop()


def test_on_trace_ready_never_called_warns():
    s = profiler.schedule(wait=10, warmup=1, active=1)
    with pytest.warns(UserWarning, match="on_trace_ready was never called: after 2 step"):
        with profiler.profile(schedule=s, on_trace_ready=lambda prof: None) as p:
            p.step()
            p.step()


def test_no_step_at_all_warns():
    s = profiler.schedule(wait=1, warmup=1, active=1)
    with pytest.warns(UserWarning, match="step\\(\\) was never called"):
        with profiler.profile(schedule=s, on_trace_ready=lambda prof: None):
            pass


def test_acc_events_keeps_every_window():
    # torch 2's profile(acc_events=True): events() and key_averages() cover every window.
    with profiler.profile(schedule=profiler.schedule(wait=0, warmup=1, active=1),
                          acc_events=True) as p:
        for _ in range(6):
            with profiler.record_function("work"):
                pass
            p.step()
    steps = sorted(e.trace_name for e in p.events() if e.name == "ProfilerStep*")
    assert steps == ["ProfilerStep#1", "ProfilerStep#3", "ProfilerStep#5"]
    rows = {r.key: r.count for r in p.key_averages()}
    assert rows == {"ProfilerStep*": 3, "work": 3}
    # Without it, only the last window (here the warmup cut short by the exit).
    with profiler.profile(schedule=profiler.schedule(wait=0, warmup=1, active=1)) as q:
        for _ in range(6):
            q.step()
    names = [e.trace_name for e in q.events() if e.name == "ProfilerStep*"]
    assert "ProfilerStep#1" not in names and "ProfilerStep#3" not in names
