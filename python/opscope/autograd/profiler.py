"""opscope.autograd.profiler: torch.autograd.profiler's API over opscope.

Code written for PyTorch's older profiler API runs with this import in its place::

    import opscope.autograd.profiler as profiler

    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("model_inference"):
            model(inputs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

``profile`` records one window from ``__enter__`` to ``__exit__`` on every thread (opscope's
session, the same as ``opscope.profiler.profile`` without a schedule); ``emit_nvtx`` forwards
ranges to NVTX for Nsight Systems (it needs a CUDA device and says why otherwise);
``emit_itt`` raises, as torch does when built without ITT.
"""

from __future__ import annotations

from typing import Optional

from .. import _C, _args
from .. import profiler as _profiler
from ..profiler_util import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList"]

record_function = _profiler.record_function


class profile:
    """Context manager that manages autograd profiler state and holds a summary of results.

    Args:
        enabled (bool): Setting this to False makes this context manager a no-op.
        use_cuda (bool): Times ranges on the GPU, as torch 1.13 does: with ``use_kineto=True``
            and ``ProfilerActivity.CUDA`` in ``supported_activities()``, through CUPTI (kernels,
            copies, runtime calls, and each range's CUDA time from the work it launched);
            otherwise each range is timed with CUDA events (torch's KINETO_GPU_FALLBACK,
            ``ExperimentalConfig(cuda_event_timing=True)``). Where neither can be done it warns
            "CUDA is not available, disabling CUDA profiling", as torch does on a machine
            without CUDA, followed by the reason.
        record_shapes (bool): record the inputs given to ranges.
        with_flops (bool): estimate FLOPs of ranges from their inputs.
        profile_memory (bool): record allocation reports.
        with_stack (bool): record the call stack of each range.
        with_modules (bool): record the module hierarchy of each range.
        use_kineto (bool): accepted for compatibility; opscope has one recorder.
        use_cpu (bool): must stay True: opscope records CPU ranges.
        experimental_config (ExperimentalConfig): opscope's extra options.

    After ``__exit__``, ``function_events`` is an EventList of the window's events, and
    ``table()``, ``key_averages()``, ``total_average()``, ``self_cpu_time_total``,
    ``export_chrome_trace()`` and ``export_stacks()`` work on it.
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 record_shapes: bool = False, with_flops: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config: Optional[_profiler.ExperimentalConfig] = None):
        self.enabled = enabled
        self._function_events: Optional[EventList] = None
        if not self.enabled:
            return
        self.use_cuda = use_cuda
        self.entered = False
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.record_shapes |= self.with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.use_cpu = use_cpu
        self.use_kineto = use_kineto
        self.experimental_config = experimental_config
        self._session: Optional[_profiler.profile] = None
        if not self.use_cpu:
            raise ValueError("use_cpu=False is not supported: opscope records CPU ranges "
                             "always")
        # As torch 1.13: CUPTI with use_kineto where it records, else CUDA events.
        self._cuda_events = False
        if self.use_cuda and not (use_kineto and _profiler.ProfilerActivity.CUDA
                                  in _profiler.supported_activities()):
            reason = _C.cuda_event_timing_unavailable_reason()
            if reason:
                _args.warn(f"CUDA is not available, disabling CUDA profiling ({reason})")
                self.use_cuda = False
            else:
                self._cuda_events = True

    @classmethod
    def _of_window(cls, events: EventList, **lenses) -> "profile":
        """A finished profile holding `events` (opscope.profiler.profile.profiler)."""
        p = cls(**lenses)
        p._function_events = events
        return p

    def __enter__(self) -> "profile":
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        activities = [_profiler.ProfilerActivity.CPU]
        experimental_config = self.experimental_config
        if self._cuda_events:  # the caller's config, with CUDA-event timing (not changed itself)
            given = experimental_config or _profiler.ExperimentalConfig()
            experimental_config = _profiler.ExperimentalConfig(
                verbose=given.verbose, buffer_limit_bytes=given.buffer_limit_bytes,
                record_all_threads=given.record_all_threads, cuda_event_timing=True)
        elif self.use_cuda:
            activities.append(_profiler.ProfilerActivity.CUDA)
        session = _profiler.profile(
            activities=activities, record_shapes=self.record_shapes,
            profile_memory=self.profile_memory, with_stack=self.with_stack,
            with_flops=self.with_flops, with_modules=self.with_modules,
            experimental_config=experimental_config)
        session.start()
        self._session = session
        self.entered = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        if not self.enabled:
            return False
        session, self._session = self._session, None
        if session is not None:
            session.stop()
            self._function_events = session.events()
        self.entered = False
        return False

    @property
    def function_events(self) -> EventList:
        """The window's events; as torch 2.x's, an empty EventList before it has ended (torch
        1.13: None)."""
        return EventList() if self._function_events is None else self._function_events

    def __repr__(self) -> str:
        if self._function_events is None:
            return "<unfinished opscope.autograd.profile>"
        return repr(self.function_events)

    def __str__(self) -> str:
        if self._function_events is None:
            return "<unfinished opscope.autograd.profile>"
        return str(self.function_events)

    def _check_finish(self) -> None:
        # Only the exports need a window: as torch 2.x, the summaries of an unfinished profile
        # are empty (torch 1.13 raised this for them too).
        if self._function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: Optional[str] = None,
              top_level_events_only: bool = False, time_unit: Optional[str] = None) -> str:
        """The table of the averaged events (``key_averages().table(...)``)."""
        return self.key_averages().table(
            sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only, time_unit=time_unit)

    table.__doc__ = EventList.table.__doc__

    def export_chrome_trace(self, path: str) -> None:
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    export_chrome_trace.__doc__ = EventList.export_chrome_trace.__doc__

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        self._check_finish()
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        return self.function_events.export_stacks(path, metric)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    key_averages.__doc__ = EventList.key_averages.__doc__

    def total_average(self) -> FunctionEventAvg:
        return self.function_events.total_average()

    total_average.__doc__ = EventList.total_average.__doc__

    @property
    def self_cpu_time_total(self) -> float:
        """Returns total time spent on CPU obtained as a sum of all self times across all
        the events."""
        return self.function_events.self_cpu_time_total


class emit_nvtx:
    """Makes every range emit an NVTX range, for Nsight Systems (``nsys profile``).

    Needs a CUDA device (as torch's ``emit_nvtx``, which needs CUDA): entering raises
    RuntimeError naming what is missing otherwise. Nothing is recorded by opscope meanwhile.
    """

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled = enabled
        self.entered = False
        self.record_shapes = record_shapes

    def __enter__(self) -> "emit_nvtx":
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("NVTX annotation context manager is not reentrant")
        _C._enable_nvtx(self.record_shapes)
        self.entered = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        if not self.enabled or not self.entered:
            return False
        _C._disable_nvtx()
        self.entered = False
        return False


class emit_itt:
    """Intel ITT annotations (VTune), as torch's ``emit_itt``. opscope has no ITT backend,
    so entering raises RuntimeError, as torch does when built without ITT."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled = enabled
        self.entered = False
        self.record_shapes = record_shapes

    def __enter__(self) -> "emit_itt":
        if not self.enabled:
            return self
        raise RuntimeError("Can't use ITT profiler - opscope was built without ITT")

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        return False
