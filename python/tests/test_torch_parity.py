"""The lenses of opscope.profiler.profile against PyTorch 1.13 itself (Debian's python3-torch).

The same workload of record_function ranges is profiled by torch.profiler and by
opscope.profiler with each lens switch, and the two agree on what a torch user sees of the
switch: the argument's name and default, and the columns it adds to key_averages().table().
scripts/setup-deps installs python3-torch; without it these tests skip, saying so.
"""

import inspect
import re

import pytest

import opscope.profiler as profiler

torch = pytest.importorskip("torch", reason="PyTorch 1.13 (Debian: python3-torch) is not installed")

LENSES = ["record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"]


def workload(record_function):
    for _ in range(3):
        # `args`, which both record as an input under record_shapes.
        with record_function("outer", "batch=3"):
            with record_function("inner"):
                sum(i * i for i in range(2000))


def columns(table):
    """The column names of a key_averages().table(): the line under the first rule."""
    header = table.splitlines()[1]
    return re.split(r"\s{2,}", header.strip())


def both_tables(lens, **table_args):
    """(torch's columns, opscope's columns) for the workload profiled with `lens` on."""
    options = {lens: True}
    # Deliberate difference: torch 2.x keeps with_stack's stacks off its events (it records
    # every Python call as a python_function trace event instead) unless
    # _ExperimentalConfig(verbose=True); opscope's events carry them either way. So on 2.x
    # both are asked for verbose stacks, which both have.
    verbose = lens == "with_stack" and int(torch.__version__.split(".")[0]) >= 2
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], **options,
            experimental_config=torch.profiler._ExperimentalConfig(verbose=True) if verbose
            else None) as theirs:
        workload(torch.profiler.record_function)
    with profiler.profile(
            activities=[profiler.ProfilerActivity.CPU], **options,
            experimental_config=profiler._ExperimentalConfig(verbose=True) if verbose
            else None) as ours:
        workload(profiler.record_function)
    group = {}
    if lens == "record_shapes":
        group = {"group_by_input_shape": True}
    if lens == "with_stack":
        group = {"group_by_stack_n": 5}
    return (
        columns(theirs.key_averages(**group).table(**table_args)),
        columns(ours.key_averages(**group).table(**table_args)),
    )


def test_the_lens_arguments_are_torchs():
    theirs = inspect.signature(torch.profiler.profile).parameters
    ours = inspect.signature(profiler.profile).parameters
    for lens in LENSES:
        assert lens in theirs, lens
        assert lens in ours, lens
        assert ours[lens].default == theirs[lens].default, lens


@pytest.mark.parametrize("lens", LENSES)
def test_each_lens_adds_the_columns_torch_adds(lens):
    theirs, ours = both_tables(lens, sort_by="cpu_time_total", row_limit=10)
    assert ours == theirs, f"{lens}: torch {theirs}, opscope {ours}"
    # And the switch is really on: the columns it brings are there.
    expected = {
        "profile_memory": ["CPU Mem", "Self CPU Mem"],
        "record_shapes": ["Input Shapes"],
        "with_stack": ["Source Location"],
    }.get(lens, [])
    for column in expected:
        assert column in ours, f"{lens}: no {column!r} in {ours}"
