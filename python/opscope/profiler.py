"""opscope.profiler: torch.profiler's API over opscope, for plain Python code.

The names, arguments and behaviour follow ``torch.profiler`` (profile, schedule,
ProfilerAction, ProfilerActivity, tensorboard_trace_handler, record_function,
ExecutionTraceObserver), so code written for it runs with ``import opscope.profiler as
profiler`` in its place::

    import opscope.profiler as profiler

    def trace_handler(prof):
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))

    with profiler.profile(
        schedule=profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=trace_handler,
    ) as p:
        for step in range(8):
            with profiler.record_function("train_step"):
                train_step()
            p.step()

The work happens in the native module (opscope._C): ranges are recorded by C++ on every
thread (Python threads and C++ threads alike) into one session; stopping, exports and tables
run with the GIL released. What differs from torch.profiler is listed in python/README.md.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import sys
import threading
import time
import weakref
from enum import Enum
from typing import Any, Callable, Dict, Iterable, NamedTuple, Optional

from . import _C
from . import _args
from .profiler_util import EventList, _FirstMembers

__all__ = [
    "supported_activities",
    "activity_unavailable_reason",
    "ProfilerAction",
    "ProfilerActivity",
    "schedule",
    "tensorboard_trace_handler",
    "profile",
    "record_function",
    "RecordFunctionFast",
    "ExecutionTraceObserver",
    "ExperimentalConfig",
    "_ExperimentalConfig",
    "InvalidScheduleError",
    "flight_recorder",
    "FlightDump",
    "dump_flight_recorder",
    "decode_flight_dump",
]

PROFILER_STEP_NAME = "ProfilerStep"

ProfilerActivity = _C.ProfilerActivity


class ExperimentalConfig(_C.ExperimentalConfig):
    """torch's ``_ExperimentalConfig`` (``profiler_metrics``, ``profiler_measure_per_kernel``,
    ``verbose``) and opscope's own options: ``buffer_limit_bytes`` (the session's buffers, 1 GiB
    by default), ``record_all_threads`` (False: only the thread that starts the profile),
    ``cuda_event_timing`` (time ranges with CUDA events).

    A wrong type raises TypeError naming the parameter and the types allowed.
    """

    def __init__(self, profiler_metrics: Iterable[str] = (),
                 profiler_measure_per_kernel: bool = False, verbose: bool = True, *,
                 buffer_limit_bytes: Optional[int] = None, record_all_threads: bool = True,
                 cuda_event_timing: bool = False):
        call = "ExperimentalConfig()"
        if isinstance(profiler_metrics, str) or not hasattr(profiler_metrics, "__iter__"):
            raise _args.fail(call, "profiler_metrics", "a list of str", profiler_metrics)
        metrics = [_args.text(call, "profiler_metrics", m) for m in profiler_metrics]
        options = {
            "profiler_measure_per_kernel": _args.flag(call, "profiler_measure_per_kernel",
                                                      profiler_measure_per_kernel),
            "verbose": _args.flag(call, "verbose", verbose),
            "record_all_threads": _args.flag(call, "record_all_threads", record_all_threads),
            "cuda_event_timing": _args.flag(call, "cuda_event_timing", cuda_event_timing),
        }
        if buffer_limit_bytes is not None:  # None: the native default
            options["buffer_limit_bytes"] = _args.integer(call, "buffer_limit_bytes",
                                                          buffer_limit_bytes)
            if options["buffer_limit_bytes"] < 0:
                raise ValueError(f"{call}: buffer_limit_bytes must be >= 0, got "
                                 f"{buffer_limit_bytes}")
        super().__init__(metrics, **options)


# torch.profiler's spelling.
_ExperimentalConfig = ExperimentalConfig
RecordFunctionFast = _C.RecordFunctionFast

_STACK_METRICS = ("self_cpu_time_total", "self_cuda_time_total")


def supported_activities() -> set:
    """Returns the set of activities this build can record on this machine.

    ``ProfilerActivity.CPU`` always; ``ProfilerActivity.CUDA`` where CUPTI records it (a
    driver, a device and CUPTI). Elsewhere ``profile`` accepts CUDA without recording it
    (a warning says why, and the trace lists it under ``"opscope_not_recorded"``);
    ``activity_unavailable_reason`` tells why an activity is missing from this set.
    """
    return set(_C.supported_activities())


def activity_unavailable_reason(activity: "ProfilerActivity") -> str:
    """Why ``activity`` cannot be recorded here, or ``""`` when it can.

    For ``ProfilerActivity.CUDA`` the sentence names what is missing: the CUDA driver
    (``libcuda.so.1``), a device, CUPTI (``OPSCOPE_CUPTI_LIBRARY`` names its path when it is
    not where the toolkit or PyTorch's wheels put it).
    """
    if not isinstance(activity, ProfilerActivity):
        raise TypeError(f"activity must be a ProfilerActivity, got {activity!r}")
    return _C.activity_unavailable_reason(activity)


class ProfilerAction(Enum):
    """Profiler actions that can be taken at the specified intervals."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class InvalidScheduleError(ValueError, AssertionError):
    """Invalid ``schedule()`` arguments. torch.profiler raises an AssertionError with the
    message "Invalid profiler schedule arguments"; this is one too (so code that catches it
    keeps working) and a ValueError, and its message names the argument."""


class _Schedule:
    """The callable ``schedule()`` returns: step number -> ProfilerAction.

    Backed by opscope's C++ schedule, so a ``profile`` given one steps without calling back
    into Python.
    """

    __slots__ = ("_native", "_repr")

    def __init__(self, native: _C.Schedule, description: str):
        self._native = native
        self._repr = description

    def __call__(self, step: int) -> ProfilerAction:
        return ProfilerAction(self._native(step))

    def __repr__(self) -> str:
        return self._repr


def schedule(
    *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0
) -> Callable[[int], ProfilerAction]:
    """Returns a callable that can be used as profiler ``schedule`` argument.

    The profiler will skip the first ``skip_first`` steps, then wait for ``wait`` steps, then
    do the warmup for the next ``warmup`` steps, then do the active recording for the next
    ``active`` steps and then repeat the cycle starting with ``wait`` steps. The optional
    number of cycles is specified with the ``repeat`` parameter, the zero value means that the
    cycles will continue until the profiling is finished. The last active step of each cycle
    is ``RECORD_AND_SAVE``: the window ends there and ``on_trace_ready`` is called.

    Raises ``InvalidScheduleError`` ("Invalid profiler schedule arguments: ...", naming the
    argument) when wait, warmup, repeat or skip_first is negative or active is not positive:
    a ValueError, and an AssertionError as torch raises. Warns when warmup is 0.
    """
    wait, warmup, active, repeat, skip_first = (
        _args.integer("schedule()", name, value)
        for name, value in (("wait", wait), ("warmup", warmup), ("active", active),
                            ("repeat", repeat), ("skip_first", skip_first)))
    try:
        native = _C.schedule(
            wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first
        )
    except ValueError as e:
        raise InvalidScheduleError(str(e)) from None
    return _Schedule(
        native,
        f"schedule(wait={wait}, warmup={warmup}, active={active}, repeat={repeat}, "
        f"skip_first={skip_first})",
    )


def _default_schedule_fn(_: int) -> ProfilerAction:
    """Default profiler behavior: records every step, from start to stop."""
    return ProfilerAction.RECORD


def tensorboard_trace_handler(
    dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False
) -> Callable[[Any], None]:
    """Returns an ``on_trace_ready`` handler that writes each window to ``dir_name``.

    Files are named ``<worker_name>.<time_ns>.pt.trace.json`` (``.gz`` appended with
    ``use_gzip``), which TensorBoard's profiler plugin finds when given ``dir_name`` as its
    logdir. ``worker_name`` should be unique for each worker in distributed scenario; it
    defaults to ``<hostname>_<pid>``. The directory is created when needed; the handler
    raises RuntimeError ("Can't create directory: <dir_name>") when it cannot be.
    """
    dir_name = _args.path("tensorboard_trace_handler()", "dir_name", dir_name)
    _args.text("tensorboard_trace_handler()", "worker_name", worker_name, optional=True)
    use_gzip = _args.flag("tensorboard_trace_handler()", "use_gzip", use_gzip)
    if not dir_name:
        raise ValueError(
            "tensorboard_trace_handler: dir_name is empty; give the log directory to write to"
        )

    def handler_fn(prof) -> None:
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        # Nanoseconds keep two windows of one worker from sharing a name.
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json"
        if use_gzip:
            file_name = file_name + ".gz"
        prof.export_chrome_trace(os.path.join(dir_name, file_name))

    return handler_fn


# A C-level type (python/src/record_function.cpp): with no session, entering and exiting cost
# about what an empty `with` on a trivial Python context manager costs.
record_function = _C.record_function


def _decorate(rf: record_function, func: Callable) -> Callable:
    """``@record_function(name)``: every call of ``func`` records its own range."""
    name, args = rf.name, rf.args

    @functools.wraps(func)
    def wrapped(*a, **kw):
        with record_function(name, args):
            return func(*a, **kw)

    # Stacks show the decorated function, not this wrapper (all wrappers share its code).
    _C._hide_frames_of(wrapped.__code__)
    return wrapped


class ExecutionTraceObserver:
    """Execution Trace Observer: the program as a graph (Chakra ET JSON), one node per range.

    Each process can have a single ExecutionTraceObserver instance. The observer can be added
    to record function callbacks via calling ``register_callback()`` explicitly. Without
    calling ``unregister_callback()``, repeated calls to ``register_callback()`` will not add
    additional observers to record function callbacks. Once an ExecutionTraceObserver is
    created, the ``start()`` and ``stop()`` methods control when the event data is recorded.

    Deleting or calling ``unregister_callback()`` will remove the observer from the record
    function callbacks, finalize the output file, and will stop incurring any overheads.

    Given to ``profile(execution_trace_observer=...)``, it records the same windows as the
    profiler and is cleaned up when the profile exits.
    """

    def __init__(self):
        self._native = _C.ExecutionTraceObserver()

    def __del__(self):
        native = getattr(self, "_native", None)
        if native is not None:
            native.unregister_callback()

    def register_callback(self, output_file_path: str) -> "ExecutionTraceObserver":
        """Adds the observer; its data is written to ``output_file_path``.

        Raises RuntimeError when the path cannot be written or another observer is registered
        in this process.
        """
        self._native.register_callback(
            _args.path("ExecutionTraceObserver.register_callback()", "output_file_path",
                       output_file_path))
        return self

    def unregister_callback(self) -> None:
        """Removes the observer and writes the complete file to its path."""
        self._native.unregister_callback()

    @property
    def is_registered(self) -> bool:
        """True when the observer is registered."""
        return self._native.is_registered()

    def is_running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._native.is_running()

    def start(self) -> None:
        """Starts recording (only when registered)."""
        self._native.start()

    def stop(self) -> None:
        """Stops recording."""
        self._native.stop()

    def cleanup(self) -> None:
        """Calls ``unregister_callback()``."""
        self._native.cleanup()

    def get_output_file_path(self) -> str:
        """The path given to ``register_callback()``; RuntimeError when not registered."""
        return self._native.get_output_file_path()


def _trace_ready_of(ref: "weakref.ReferenceType[profile]") -> Callable[[], None]:
    # The native profiler holds this callable; a weak reference keeps it from holding the
    # profile object alive (profile -> native -> callable -> profile).
    def trace_ready() -> None:
        prof = ref()
        if prof is not None and prof.on_trace_ready is not None:
            prof.on_trace_ready(prof)

    return trace_ready


class profile:
    """Profiler context manager.

    Args:
        activities (iterable): activity groups to record: ``ProfilerActivity.CPU`` (and
            ``ProfilerActivity.CUDA``, accepted but not recorded yet). Default:
            ``supported_activities()``.
        schedule (Callable): takes the step number (int) and returns the ``ProfilerAction``
            to perform at that step; ``schedule()`` builds one. Default: record every step.
        on_trace_ready (Callable): called with this profile object at each step when
            ``schedule`` returns ``ProfilerAction.RECORD_AND_SAVE``, and when the profile
            stops while recording. ``tensorboard_trace_handler()`` builds one.
        record_shapes (bool): record the inputs given to ranges (``record_function``'s
            ``args``, ``RecordFunctionFast``'s input values).
        profile_memory (bool): record allocations: the interpreter's (objects and their
            buffers), numpy array data when numpy is loaded (on the thread that starts the
            profile), and C++ code that reports memory; each is attributed to the innermost
            range open on its thread.
        with_stack (bool): record the call stack of each range.
        with_flops (bool): estimate FLOPs of ranges from their inputs.
        with_modules (bool): record the module hierarchy of each range.
        experimental_config (ExperimentalConfig): opscope's extra options (buffer limit,
            recording all threads or only the starting one).
        execution_trace_observer (ExecutionTraceObserver): started and stopped with each
            recording window, cleaned up when the profile exits.
        acc_events (bool): accumulate the events of every window (torch 2's option):
            ``events()`` and ``key_averages()`` then cover all the windows this profile
            recorded, not only the last.
        use_cuda (bool): deprecated, as in torch (a warning says to use ``activities``).

    With a schedule, every step is wrapped in a ``ProfilerStep#<n>`` range (``ProfilerStep*``
    in ``events()`` and ``key_averages()``, as in torch). Ranges from every thread land in
    the same session; opscope records one session at a time per process, so starting a
    second profile while one records raises RuntimeError.

    Example::

        with profile(schedule=schedule(wait=1, warmup=1, active=2),
                     on_trace_ready=tensorboard_trace_handler("./log")) as p:
            for batch in data:
                train(batch)
                p.step()
    """

    def __init__(
        self,
        *,
        activities: Optional[Iterable[Any]] = None,
        schedule: Optional[Callable[[int], ProfilerAction]] = None,
        on_trace_ready: Optional[Callable[..., Any]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Optional[ExperimentalConfig] = None,
        execution_trace_observer: Optional[ExecutionTraceObserver] = None,
        acc_events: bool = False,
        use_cuda: Optional[bool] = None,
    ):
        call = "profile()"
        if activities is not None and not hasattr(activities, "__iter__"):
            raise _args.fail(call, "activities", "an iterable of ProfilerActivity (CPU, CUDA)",
                             activities)
        self.activities = set(activities) if activities else supported_activities()
        if use_cuda is not None:
            use_cuda = _args.flag(call, "use_cuda", use_cuda)
            # torch 2.x's words and category (torch 1.13: a UserWarning, "use_cuda is
            # deprecated, use activities argument instead").
            _args.warn("`use_cuda` is deprecated, use `activities` argument instead",
                       FutureWarning)
            if use_cuda:
                self.activities.add(ProfilerActivity.CUDA)
            else:
                self.activities.discard(ProfilerActivity.CUDA)
        for activity in self.activities:
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"{call}: activities must hold ProfilerActivity values (CPU, "
                                f"CUDA), got {_args.got(activity)}")
        record_shapes, profile_memory, with_stack, with_flops, with_modules, acc_events = (
            _args.flag(call, name, value)
            for name, value in (("record_shapes", record_shapes),
                                ("profile_memory", profile_memory), ("with_stack", with_stack),
                                ("with_flops", with_flops), ("with_modules", with_modules),
                                ("acc_events", acc_events)))
        if experimental_config is not None and not isinstance(experimental_config,
                                                              _C.ExperimentalConfig):
            raise _args.fail(call, "experimental_config",
                             "an opscope.profiler.ExperimentalConfig or None", experimental_config)
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"{call}: on_trace_ready must be callable, got {on_trace_ready!r}")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"{call}: schedule must be a callable taking the step number (as "
                            f"schedule() returns), got {schedule!r}")
        self.schedule = schedule if schedule is not None else _default_schedule_fn
        # As torch: steps are ProfilerStep#N ranges only when a schedule was given.
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = experimental_config
        if execution_trace_observer is not None and not isinstance(
            execution_trace_observer, ExecutionTraceObserver
        ):
            raise _args.fail(call, "execution_trace_observer",
                             "an opscope.profiler.ExecutionTraceObserver or None",
                             execution_trace_observer)
        self.execution_trace_observer = execution_trace_observer
        self.preset_metadata: Dict[str, str] = {}
        self.acc_events = acc_events
        self._windows = []  # with acc_events: every finished window's result, in order

        if schedule is None:
            native_schedule = None
        elif isinstance(schedule, _Schedule):
            native_schedule = schedule._native  # steps without calling into Python
        else:
            native_schedule = schedule
        # Sorted so that the activity list (and the warning about unrecorded ones) is stable.
        ordered = sorted(self.activities, key=lambda a: int(a))
        self._native = _C.Profiler(
            activities=ordered,
            schedule=native_schedule,
            on_trace_ready=_trace_ready_of(weakref.ref(self)) if on_trace_ready else None,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=experimental_config,
            execution_trace_observer=(
                execution_trace_observer._native if execution_trace_observer else None
            ),
        )

        # profiler.py marks each trace with the lenses it was recorded with ("record_shapes":
        # 1, ...); as preset metadata they reach every window this profile records.
        for lens in ("profile_memory", "with_stack", "record_shapes", "with_modules", "with_flops"):
            if getattr(self, lens):
                self._native.preset_metadata_json(lens, "1")

    # -- control ---------------------------------------------------------------------------

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        self.stop()
        if self.execution_trace_observer:
            self.execution_trace_observer.cleanup()

    def start(self) -> None:
        """Starts the schedule at step 0 (and a recording window if step 0 records).

        Raises RuntimeError when already started or when another session records in this
        process.
        """
        try:
            self._native.start()
        finally:
            self._keep_window()

    def stop(self) -> None:
        """Ends the current step and the schedule; ``on_trace_ready`` runs if a window was
        recording. Warns when ``on_trace_ready`` was given but never called."""
        try:
            self._native.stop()
        finally:
            self._keep_window()

    def step(self) -> None:
        """Signals the profiler that the next profiling step has started."""
        try:
            self._native.step()
        finally:
            self._keep_window()

    def _keep_window(self) -> None:
        # With acc_events, each window that finished in the call just made joins the list.
        if not self.acc_events or not self._native.has_result():
            return
        result = self._native.result()
        last = self._windows[-1] if self._windows else None
        if last is None or (last.start_time_ns, last.end_time_ns) != (
                result.start_time_ns, result.end_time_ns):
            self._windows.append(result)

    @property
    def step_num(self) -> int:
        """The current step: 0 after ``start()``, one more after each ``step()``."""
        return self._native.step_num

    @property
    def current_action(self) -> ProfilerAction:
        """What the schedule does at ``step_num``."""
        return ProfilerAction(self._native.current_action)

    # -- results ---------------------------------------------------------------------------

    def _result(self, call: str) -> _C.Result:
        # RuntimeError, naming the reason and `call` (the method the user called), when no
        # window has finished yet.
        return self._native.result(f"profile.{call}()")

    def _lenses(self) -> dict:
        return {"profile_memory": self.profile_memory, "with_flops": self.with_flops}

    def events(self) -> EventList:
        """The unaggregated events of the last finished window: an EventList (a list) of
        FunctionEvent with torch's attributes (name, thread, time_range, cpu_time_total,
        cpu_parent, cpu_children, input_shapes, stack, cpu_memory_usage, ...)."""
        if self.acc_events and self._windows:
            events = [e for window in self._windows for e in window.function_events()]
            return EventList(events, _lenses=self._lenses())
        result = self._result("events")
        return EventList(result.function_events(), _result=result, _lenses=self._lenses())

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> EventList:
        """Averages the events of the last window by name, and by input shapes and the
        innermost ``group_by_stack_n`` stack frames when asked: an EventList of
        FunctionEventAvg.

        Needs ``record_shapes`` for input shapes and ``with_stack`` for stacks. The result's
        ``table(sort_by=None, row_limit=100, ...)`` renders the operator table.
        """
        group_by_input_shape = _args.flag("profile.key_averages()", "group_by_input_shape",
                                          group_by_input_shape)
        group_by_stack_n = _args.integer("profile.key_averages()", "group_by_stack_n",
                                         group_by_stack_n)
        if self.acc_events and len(self._windows) > 1:
            return self.events().key_averages(group_by_input_shape, group_by_stack_n)
        result = self._result("key_averages")
        rows = result.key_averages_of(None, group_by_input_shape, group_by_stack_n)
        _FirstMembers(rows, result.function_events, group_by_input_shape, group_by_stack_n)
        return EventList(rows, _result=result, _lenses=self._lenses())

    @property
    def profiler(self):
        """The last finished window as torch's ``prof.profiler`` shows it: an
        ``opscope.autograd.profiler.profile`` holding its ``function_events`` (None before a
        window has finished)."""
        if not self._native.has_result():
            return None
        from .autograd.profiler import profile as _legacy_profile

        return _legacy_profile._of_window(self.events(), record_shapes=self.record_shapes,
                                          profile_memory=self.profile_memory,
                                          with_stack=self.with_stack, with_flops=self.with_flops,
                                          with_modules=self.with_modules)

    def export_chrome_trace(self, path: str) -> None:
        """Exports the last window as a Chrome/Perfetto trace (gzip when path ends in .gz)."""
        path = _args.path("profile.export_chrome_trace()", "path", path)
        self._result("export_chrome_trace").export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Save stack traces to a file, in the collapsed format flame-graph tools read.

        Args:
            path (str): save stacks file to this location;
            metric (str): metric to use: "self_cpu_time_total" or "self_cuda_time_total"
        """
        path = _args.path("profile.export_stacks()", "path", path)
        _args.text("profile.export_stacks()", "metric", metric)
        if metric not in _STACK_METRICS:
            raise ValueError(
                f"export_stacks: unknown metric '{metric}'; use {_STACK_METRICS[0]} or "
                f"{_STACK_METRICS[1]}"
            )
        self._result("export_stacks").export_stacks(path, metric)

    def export_memory_timeline(self, path: str, device: Optional[str] = None) -> None:
        """Exports the memory timeline of ``device`` (default "cpu"); the format follows the
        suffix: ``.html``, ``.json``, ``.json.gz`` or ``.raw.json.gz``.

        Needs record_shapes, profile_memory and with_stack (ValueError otherwise).
        """
        path = _args.path("profile.export_memory_timeline()", "path", path)
        _args.text("profile.export_memory_timeline()", "device", device, optional=True)
        required = ("record_shapes", "profile_memory", "with_stack")
        missing = [f"{name}=True" for name in required if not getattr(self, name)]
        if missing:
            raise ValueError(f"{', '.join(missing)} required for memory profiling.")
        result = self._result("export_memory_timeline")
        result.export_memory_timeline(path, device or "cpu")

    # -- metadata --------------------------------------------------------------------------

    def add_metadata(self, key: str, value: str) -> None:
        """Adds user-defined metadata with a string key and value to the trace file."""
        self._native.add_metadata(_args.text("profile.add_metadata()", "key", key),
                                  _args.text("profile.add_metadata()", "value", value))

    def add_metadata_json(self, key: str, value: str) -> None:
        """Adds user-defined metadata with a string key and a valid JSON value to the trace
        file (ValueError when ``value`` is not valid JSON)."""
        self._native.add_metadata_json(_args.text("profile.add_metadata_json()", "key", key),
                                       _args.text("profile.add_metadata_json()", "value", value))

    def preset_metadata_json(self, key: str, value: str) -> None:
        """Presets user-defined metadata, added to every window this profile records
        (ValueError when ``value`` is not valid JSON)."""
        self._native.preset_metadata_json(
            _args.text("profile.preset_metadata_json()", "key", key),
            _args.text("profile.preset_metadata_json()", "value", value))
        self.preset_metadata[key] = value

    def _stats(self) -> Optional[dict]:
        """Counts of the last window: events recorded and dropped, buffer bytes; None before
        a window has finished."""
        if not self._native.has_result():
            return None
        return self._native.stats()


# A step range begins inside profile.start() or profile.step(), called from the user's code
# (or from __enter__): its stack starts at that call, without opscope's own frames.
for _method in (profile.start, profile.step, profile.__enter__):
    _C._hide_frames_of(_method.__code__)
del _method


# -- the flight recorder -------------------------------------------------------------------

# FlightRecorderOptions' bounds (include/opscope/flight_recorder.h), checked here so that the
# errors name the Python parameters; the native checks stay behind them.
_FLIGHT_MIN_BYTES = 256 * 1024
_FLIGHT_MAX_WINDOW = 10_000


class FlightDump(NamedTuple):
    """What a flight recorder dump wrote: the trace's ``path`` (also the value of
    ``os.fspath(dump)``), its ``events`` (open ranges included) and the ``open_ranges``
    (ranges still open at the dump, written with ``args {"open": true}``)."""

    path: str
    events: int
    open_ranges: int

    def __fspath__(self) -> str:
        return self.path


# The running flight_recorder made by this module, kept alive until its stop(): an always-on
# recorder started with a bare `flight_recorder(...)` call records until the program ends.
_flight: Optional["flight_recorder"] = None
_flight_hook_state = threading.local()  # .active while this thread's exception hook dumps


def _dump_at_exception(what: str) -> None:
    """Dumps the running recorder into its dump_dir when it has dump_on_exception, saying
    where on stderr (the traceback follows); never raises."""
    recorder = _flight
    if recorder is None or not recorder._dump_on_exception:
        return
    try:
        path = _C.flight_dump_path("exception")
        dump = FlightDump(*_C.dump_flight_recorder(path, "exception",
                                                    "flight_recorder (dump_on_exception)"))
        sys.stderr.write(f"opscope: the flight recorder's last {recorder.keep:g} s before this "
                         f"{what} are in {dump.path}\n")
    except Exception as e:  # noqa: BLE001 - a hook must not raise over the user's exception
        sys.stderr.write(f"opscope: the flight recorder's dump at this {what} failed: {e}\n")


class _ExceptionHooks:
    """sys.excepthook and threading.excepthook wrapped: an uncaught exception dumps the
    recorder (dump_on_exception), then the hook that was there runs. Removed at stop() when
    still on top; one another library wrapped since stays, and only forwards once no recorder
    asks for dumps. A thread-local flag keeps a hook chain that holds ours twice from dumping
    twice."""

    def __init__(self):
        self.previous_sys = sys.excepthook
        self.previous_threading = threading.excepthook

        def sys_hook(exc_type, exc, tb):
            self._dump_then(lambda: self.previous_sys(exc_type, exc, tb),
                            "uncaught exception")

        def threading_hook(args):
            if args.exc_type is SystemExit:  # threading ignores it: not a failure
                self.previous_threading(args)
                return
            name = args.thread.name if args.thread is not None else "a thread"
            self._dump_then(lambda: self.previous_threading(args),
                            f"uncaught exception in thread {name!r}")

        self.sys_hook = sys_hook
        self.threading_hook = threading_hook
        sys.excepthook = sys_hook
        threading.excepthook = threading_hook

    @staticmethod
    def _dump_then(chain: Callable[[], Any], what: str) -> None:
        if getattr(_flight_hook_state, "active", False):
            chain()
            return
        _flight_hook_state.active = True
        try:
            _dump_at_exception(what)
            chain()
        finally:
            _flight_hook_state.active = False

    def remove(self) -> None:
        if sys.excepthook is self.sys_hook:
            sys.excepthook = self.previous_sys
        if threading.excepthook is self.threading_hook:
            threading.excepthook = self.previous_threading


class flight_recorder:
    """Always-on recording of the last ``keep`` seconds of ranges, dumped when something goes
    wrong.

    Starts recording when made: every thread's ranges (``record_function``,
    ``RecordFunctionFast``, C++ ranges) go into a ring of ``max_bytes`` that reuses its oldest
    chunk when full, so memory never grows past it. ``dump(path)`` writes what the last
    ``keep`` seconds held, and the ranges still open, as a trace (the format by the suffix, as
    ``export_chrome_trace``), while recording goes on. Stops at ``stop()`` or at the end of a
    ``with`` block; until then the recorder lives on even when no reference to it is kept.

    Args:
        keep (float): seconds of ranges a dump holds.
        max_bytes (int): the ring's memory, at least 256 KiB (64 MiB by default).
        record_shapes, profile_memory, with_stack, with_flops, with_modules (bool): the
            lenses, as ``profile``'s (``profile_memory`` wraps the interpreter's allocators
            while the recorder records, as a profile with it does).
        slow_step_factor (float): a ``step()`` that took longer than this factor (above 1)
            times the median of the last ``slow_step_window`` steps dumps into ``dump_dir``;
            0 (the default) turns the trigger off. At most one such dump per
            ``slow_step_min_interval`` seconds.
        dump_dir (str or PathLike): an existing directory (relative to the current one when the
            recorder starts), where dumps no caller names a path for go:
            ``opscope_flight_<pid>_<trigger>_<n>.json``.
        dump_on_crash (bool): on SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT or std::terminate,
            write the ring raw to ``<dump_dir>/opscope_flight_<pid>_crash.raw`` (a file opened
            now), which ``decode_flight_dump`` turns into a trace later.
        dump_on_exception (bool): an uncaught exception (``sys.excepthook``, and
            ``threading.excepthook`` for threads) dumps into ``dump_dir`` with trigger
            "exception" before the previous hook runs.

    One flight recorder per process: making a second one while one records raises
    RuntimeError naming the first. A ``profile`` window pauses the recorder while it records
    (the window's ranges are the window's; the dump's ``flightRecorder.pausedNs`` metadata
    names the span). ``dump_flight_recorder(path)`` dumps the process's recorder, whoever
    started it (``OPSCOPE_FLIGHT_RECORDER`` in the environment, or C++ code).

    Example::

        with flight_recorder(keep=30, dump_dir="/tmp/dumps") as fr:
            for batch in data:
                train(batch)
                fr.step()
            fr.dump("last_30s.json")
    """

    def __init__(
        self,
        keep: float = 60.0,
        max_bytes: int = 64 * 2**20,
        *,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        slow_step_factor: float = 0.0,
        slow_step_window: int = 20,
        slow_step_min_interval: float = 60.0,
        dump_dir: "str | os.PathLike[str]" = ".",
        dump_on_crash: bool = False,
        dump_on_exception: bool = True,
    ):
        global _flight
        call = "flight_recorder()"
        self._native = None
        self._hooks = None
        keep = _args.number(call, "keep", keep)
        if not (0 < keep < math.inf):
            raise ValueError(f"{call}: keep must be a number of seconds above 0, got {keep!r}")
        max_bytes = _args.integer(call, "max_bytes", max_bytes)
        if max_bytes < _FLIGHT_MIN_BYTES:
            raise ValueError(f"{call}: max_bytes must be at least {_FLIGHT_MIN_BYTES} (256 KiB),"
                             f" got {max_bytes}")
        lenses = {
            name: _args.flag(call, name, value)
            for name, value in (("record_shapes", record_shapes),
                                ("profile_memory", profile_memory), ("with_stack", with_stack),
                                ("with_flops", with_flops), ("with_modules", with_modules))
        }
        slow_step_factor = _args.number(call, "slow_step_factor", slow_step_factor)
        if slow_step_factor != 0 and not (1 < slow_step_factor < math.inf):
            raise ValueError(f"{call}: slow_step_factor must be 0 (off) or a factor above 1, "
                             f"got {slow_step_factor!r}")
        slow_step_window = _args.integer(call, "slow_step_window", slow_step_window)
        if not 3 <= slow_step_window <= _FLIGHT_MAX_WINDOW:
            raise ValueError(f"{call}: slow_step_window must be between 3 and "
                             f"{_FLIGHT_MAX_WINDOW} steps, got {slow_step_window}")
        slow_step_min_interval = _args.number(call, "slow_step_min_interval",
                                              slow_step_min_interval)
        if not (0 <= slow_step_min_interval < math.inf):
            raise ValueError(f"{call}: slow_step_min_interval must be seconds, 0 or more, got "
                             f"{slow_step_min_interval!r}")
        # Absolute: the dumps go where dump_dir named when the recorder started, whatever
        # directory the program moves to later.
        dump_dir = os.path.abspath(_args.path(call, "dump_dir", dump_dir))
        if not os.path.isdir(dump_dir):
            raise ValueError(f"{call}: dump_dir must be an existing directory (where slow "
                             f"steps', exceptions' and crashes' dumps go), got {dump_dir!r}")
        dump_on_crash = _args.flag(call, "dump_on_crash", dump_on_crash)
        dump_on_exception = _args.flag(call, "dump_on_exception", dump_on_exception)

        if _flight is not None and _flight.running:
            raise RuntimeError(f"{call}: a flight recorder is already recording in this "
                               f"process: {_flight._origin}; one records at a time: stop() it "
                               f"first, or dump it with dump_flight_recorder()")
        if _C.flight_recorder_running():
            env = os.environ.get("OPSCOPE_FLIGHT_RECORDER")
            origin = (f"the one OPSCOPE_FLIGHT_RECORDER={env} started" if env else
                      "one started by C++ code (opscope::FlightRecorder)")
            raise RuntimeError(f"{call}: a flight recorder is already recording in this "
                               f"process: {origin}; one records at a time: dump it with "
                               f"dump_flight_recorder()")

        self.keep = keep
        self.max_bytes = max_bytes
        self.record_shapes = lenses["record_shapes"]
        self.profile_memory = lenses["profile_memory"]
        self.with_stack = lenses["with_stack"]
        self.with_flops = lenses["with_flops"]
        self.with_modules = lenses["with_modules"]
        self.slow_step_factor = slow_step_factor
        self.slow_step_window = slow_step_window
        self.slow_step_min_interval = slow_step_min_interval
        self.dump_dir = dump_dir
        self.dump_on_crash = dump_on_crash
        self._dump_on_exception = dump_on_exception
        self._origin = f"the flight_recorder(keep={keep:g}) started at {_args.caller()}"
        self._native = _C.FlightRecorder(
            keep=keep, max_bytes=max_bytes, slow_step_factor=slow_step_factor,
            slow_step_window=slow_step_window, slow_step_min_interval=slow_step_min_interval,
            dump_dir=dump_dir, dump_on_crash=dump_on_crash, **lenses)
        _flight = self
        if dump_on_exception:
            self._hooks = _ExceptionHooks()

    @property
    def dump_on_exception(self) -> bool:
        return self._dump_on_exception

    @property
    def running(self) -> bool:
        """Whether this recorder records (made and not stopped)."""
        return self._native is not None and self._native.running

    def __enter__(self) -> "flight_recorder":
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "recording" if self.running else "stopped"
        return (f"<opscope.profiler.flight_recorder keep={self.keep:g} s "
                f"max_bytes={self.max_bytes} dump_dir={self.dump_dir!r} {state}>")

    def dump(self, path: "str | os.PathLike[str]") -> FlightDump:
        """Writes the last ``keep`` seconds of ranges, and the ranges still open, to ``path``
        (a trace in any format of ``export_chrome_trace``, by the suffix) while recording goes
        on; returns what it wrote. RuntimeError when this recorder was stopped, when another
        dump is being written (one at a time; the error names its path) or the file cannot be
        written."""
        path = _args.path("flight_recorder.dump()", "path", path)
        return FlightDump(*self._native.dump(path, "flight_recorder.dump()"))

    def step(self) -> None:
        """Marks the end of a step, for the slow-step trigger (nothing to do without it)."""
        self._native.step()

    def stop(self) -> None:
        """Stops recording and frees the ring, after a dump under way; nothing when stopped
        already."""
        global _flight
        if self._native is None:
            return
        self._native.stop()
        if self._hooks is not None:
            self._hooks.remove()
            self._hooks = None
        if _flight is self:
            _flight = None


def dump_flight_recorder(path: "str | os.PathLike[str]") -> FlightDump:
    """Dumps the process's flight recorder, whoever started it (``flight_recorder()``,
    ``OPSCOPE_FLIGHT_RECORDER`` in the environment, or C++ code), to ``path``, while recording
    goes on. RuntimeError when none records."""
    path = _args.path("dump_flight_recorder()", "path", path)
    return FlightDump(*_C.dump_flight_recorder(path, "dump_flight_recorder()"))


def decode_flight_dump(raw_path: "str | os.PathLike[str]",
                       out_path: "str | os.PathLike[str]") -> FlightDump:
    """Turns the raw file a crash left (``<dump_dir>/opscope_flight_<pid>_crash.raw``) into a
    trace at ``out_path`` (the format by the suffix), with the crashed process's names, threads
    and lenses. RuntimeError naming the file and the byte where it is not a whole dump."""
    raw_path = _args.path("decode_flight_dump()", "raw_path", raw_path)
    out_path = _args.path("decode_flight_dump()", "out_path", out_path)
    return FlightDump(*_C.decode_flight_dump(raw_path, out_path))
