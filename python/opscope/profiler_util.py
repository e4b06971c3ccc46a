"""The result types of opscope's profilers, shaped like ``torch.autograd.profiler_util``.

``profile.events()`` and ``profile.key_averages()`` return an :class:`EventList`: a ``list``
(slicing, ``len``, iteration and sorting work as on any list) of ``FunctionEvent`` or
``FunctionEventAvg`` objects, with torch's methods: ``table()``, ``key_averages()``,
``total_average()``, ``self_cpu_time_total``, ``export_chrome_trace()`` and
``export_stacks()``. The events themselves are native objects (``opscope._C``) reading the
window's immutable result; tables are rendered by the same C++ code as
``opscope::KeyAverages::table()``.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable, Iterable, List, Optional

from . import _C
from . import _args

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "DeviceType", "Interval", "Kernel"]

FunctionEvent = _C.FunctionEvent
FunctionEventAvg = _C.FunctionEventAvg
DeviceType = _C.DeviceType

_STACK_METRICS = ("self_cpu_time_total", "self_cuda_time_total")

# One GPU event of FunctionEvent.kernels, as torch's: its name, device and duration in us.
Kernel = namedtuple("Kernel", ["name", "device", "duration"])


class Interval:
    """A span of a trace in microseconds, as ``FunctionEvent.time_range`` gives it."""

    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start}, end={self.end})"


def _group_key(item, group_by_input_shape: bool, group_by_stack_n: int) -> tuple:
    """The key key_averages() groups an event (or finds a row) under, as torch's."""
    key = (item.key,)
    if group_by_input_shape:
        key += (str(item.input_shapes),)
    if group_by_stack_n > 0:
        key += (tuple(item.stack[:group_by_stack_n]),)
    return key


class _FirstMembers:
    """Gives each row of key_averages() its first member event (``_first``): torch's
    FunctionEventAvg takes ``cpu_parent``, ``cpu_children`` and ``scope`` from the first event
    added to it. The rows call it (``_find_first``) when one of those is first asked for, so
    averages nobody walks the tree of cost no pass over the events."""

    def __init__(self, rows: List[Any], events: Callable[[], List[Any]],
                 group_by_input_shape: bool, group_by_stack_n: int):
        self._rows = rows
        self._events = events
        self._grouping = (group_by_input_shape, group_by_stack_n)
        for row in rows:
            row._find_first = self

    def __call__(self) -> None:
        if self._rows is None:
            return
        wanted = {_group_key(row, *self._grouping): row for row in self._rows}
        self._rows = None
        for e in self._events():
            row = wanted.pop(_group_key(e, *self._grouping), None)
            if row is not None:
                row._first = e
                if not wanted:
                    break


class EventList(list):
    """A list of events (``profile.events()``) or of averages (``key_averages()``).

    Besides being a list it renders the operator table and exports the window the events came
    from. A list built by hand from events of one window (``EventList(e for e in events if
    ...)``) works too: the table and averages are then of the events it holds.
    """

    def __init__(self, items: Iterable[Any] = (), *, _result: Optional[_C.Result] = None,
                 _lenses: Optional[dict] = None):
        super().__init__(items)
        self._result = _result
        self._lenses = _lenses or {}

    def _window(self) -> _C.Result:
        if self._result is None:
            for item in self:
                if isinstance(item, FunctionEvent):
                    self._result = item._result
                    break
        if self._result is None:
            raise RuntimeError(
                "this EventList holds no events of a recorded window, so there is nothing to "
                "export; export from profile.events() or the profile itself"
            )
        return self._result

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: Optional[str] = None,
              top_level_events_only: bool = False, time_unit: Optional[str] = None) -> str:
        """Prints an EventList as a nicely formatted table.

        Args:
            sort_by (str, optional): Attribute used to sort entries. By default they are
                printed in the same order as they were registered. Valid keys include:
                ``cpu_time``, ``cuda_time``, ``cpu_time_total``, ``cuda_time_total``,
                ``cpu_memory_usage``, ``cuda_memory_usage``, ``self_cpu_memory_usage``,
                ``self_cuda_memory_usage``, ``count``.
            top_level_events_only (bool, optional): Boolean flag to determine the selection
                of events to display. If true, the profiler will only display events at top
                level like top-level invocation of python ``lstm.forward()``.
            time_unit (str, optional): ``"s"``, ``"ms"`` or ``"us"`` for every time in the
                table; by default each time picks its own.

        Returns:
            A string containing the table.
        """
        call = "EventList.table()"
        _args.text(call, "sort_by", sort_by, optional=True)
        row_limit, max_src_column_width, max_name_column_width, max_shapes_column_width = (
            _args.integer(call, name, value)
            for name, value in (("row_limit", row_limit),
                                ("max_src_column_width", max_src_column_width),
                                ("max_name_column_width", max_name_column_width),
                                ("max_shapes_column_width", max_shapes_column_width)))
        _args.text(call, "header", header, optional=True)
        top_level_events_only = _args.flag(call, "top_level_events_only", top_level_events_only)
        _args.text(call, "time_unit", time_unit, optional=True)
        return _C.table_of(
            list(self), profile_memory=bool(self._lenses.get("profile_memory")),
            with_flops=bool(self._lenses.get("with_flops")), sort_by=sort_by,
            row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only, time_unit=time_unit)

    def __str__(self) -> str:
        return self.table()

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> "EventList":
        """Averages all function events over their keys.

        Args:
            group_by_input_shape: group entries by (event name, input shapes) rather than
                just event name. This is useful to see which input shapes contribute to the
                runtime the most and may help with size-specific optimizations or choosing
                the best candidates for quantization (aka fitting a roof line).
            group_by_stack_n: group by top n stack trace entries.

        Returns:
            An EventList containing FunctionEventAvg objects.
        """
        group_by_input_shape = _args.flag("EventList.key_averages()", "group_by_input_shape",
                                          group_by_input_shape)
        group_by_stack_n = _args.integer("EventList.key_averages()", "group_by_stack_n",
                                         group_by_stack_n)
        events = [e for e in self if isinstance(e, FunctionEvent)]
        if len(events) != len(self):
            raise TypeError("key_averages() averages FunctionEvents; this list holds averages")
        # Each window's events are averaged by the native code; events of several windows
        # (profile(acc_events=True)) are then merged by key, first seen first.
        by_window = {}
        for e in events:
            by_window.setdefault(id(e._result), (e._result, []))[1].append(e._index)
        if not by_window:
            return EventList(_result=self._result, _lenses=self._lenses)
        if len(by_window) == 1:
            result, indices = next(iter(by_window.values()))
            rows = result.key_averages_of(indices, group_by_input_shape, group_by_stack_n)
            _FirstMembers(rows, lambda: events, group_by_input_shape, group_by_stack_n)
            return EventList(rows, _result=result, _lenses=self._lenses)
        merged = {}
        for result, indices in by_window.values():
            for row in result.key_averages_of(indices, group_by_input_shape, group_by_stack_n):
                key = (row.key, str(row.input_shapes), tuple(row.stack))
                if key in merged:
                    merged[key].add(row)
                else:
                    merged[key] = row
        rows = list(merged.values())
        _FirstMembers(rows, lambda: events, group_by_input_shape, group_by_stack_n)
        return EventList(rows, _lenses=self._lenses)

    def total_average(self) -> FunctionEventAvg:
        """Averages all events.

        Returns:
            A FunctionEventAvg object keyed "Total".
        """
        total = _C.total_average_of(list(self))
        if self:
            # As torch's: it clears the key after each add, so each item added in turn hands the
            # average its tree and scope, and the last one's stay.
            last = self[-1]
            total._first = last if isinstance(last, FunctionEvent) else last._first_event()
        return total

    @property
    def self_cpu_time_total(self) -> float:
        """Returns total time spent on CPU obtained as a sum of all self times across all
        the events."""
        return sum(e.self_cpu_time_total for e in self)

    def export_chrome_trace(self, path: str) -> None:
        """Exports the window these events came from as a Chrome/Perfetto trace
        (``chrome://tracing``, https://ui.perfetto.dev); gzip when ``path`` ends in .gz."""
        path = _args.path("EventList.export_chrome_trace()", "path", path)
        self._window().export_chrome_trace(path)

    def supported_export_stacks_metrics(self) -> List[str]:
        return list(_STACK_METRICS)

    def export_stacks(self, path: str, metric: str) -> None:
        """Writes the window's stacks in the collapsed format flame-graph tools read."""
        path = _args.path("EventList.export_stacks()", "path", path)
        if metric not in _STACK_METRICS:
            raise ValueError(
                "metric should be one of: " + str(self.supported_export_stacks_metrics()))
        self._window().export_stacks(path, metric)
