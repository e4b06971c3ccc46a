"""Holistic Trace Analysis's ``TraceAnalysis`` on opscope's C++ engine.

A user of HTA changes one import::

    # from hta.trace_analysis import TraceAnalysis
    from opscope.analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir="/path/to/traces")
    temporal = analyzer.get_temporal_breakdown(visualize=False)
    kernel_types, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)

The methods keep HTA's names, arguments, defaults (including HTA's "rank 0 only" defaults) and
return shapes; the DataFrames have HTA's columns. The reports themselves are the ones of
``opscope analyze`` (include/opscope/trace_analysis.h), computed in C++ with the GIL released.

``client``: a ``dask.distributed.Client``. Each rank's trace is then read and analyzed on a
worker (the trace stays in that worker's memory between calls), and only the result tables
travel back; the decisions that depend on the whole job (whether the last profiler step is left
out, the rank of a trace without one) are made once here and passed to every worker.
Without a client everything runs in this process, one engine call over all ranks.

Differences from HTA, each deliberate:

* ``visualize=True`` draws HTA's plotly figures from the returned DataFrames (and shows them
  with ``fig.show()``, as HTA does). HTA's ``get_idle_time_breakdown(visualize=True)`` turns
  ``stream`` into strings for its plot; here ``stream`` is always an integer.
* A trace without ``distributedInfo.rank`` takes its position among the job's files as its rank
  (HTA gives every such file rank 0, so two of them replace each other).
* A directory's traces are its top-level files ending in ``.json`` or ``.json.gz`` (HTA also
  takes any other ``.gz``), in name order, as for ``opscope analyze``.

Times are HTA's, so are its numbers: a trace whose timestamps have fractions is rounded inward to
whole microseconds as HTA rounds it, or, with ``HTA_DISABLE_NS_ROUNDING=1`` (read when a
``TraceAnalysis`` is made), each timestamp is held as the double HTA reads (0.25 us steps at
today's epoch microseconds). ``times="ns"`` keeps the nanoseconds as written instead, as
``opscope analyze`` does by default (``--times hta`` there gives HTA's).
``get_time_spent_blocked_on_full_queue`` gives HTA's one row per rank; ``all_streams=True``
lists every stream whose queue was full.

This module imports pandas; ``import opscope`` does not import it (nor this module).
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

try:
    import pandas as pd
except ImportError as e:  # pandas missing, or present but broken (a numpy it was not built for)
    raise ImportError(
        f"opscope.analysis needs pandas, which cannot be imported here ({e}); install it: "
        "apt-get install python3-pandas (Debian, Ubuntu) or pip install pandas. "
        "opscope.profiler works without it.",
        name="pandas",
    ) from e

from . import _C, _args
from ._raw_trace import RawTrace, Trace

try:  # HTA's critical-path names, re-exported; they need networkx (HTA's CPGraph is a DiGraph)
    from ._critical_path import (
        BoundType,
        CPEdge,
        CPEdgeType,
        CPGraph,
        CPNode,
        CriticalPathAnalysis,
        restore_cpgraph,
    )
    _CRITICAL_PATH_NAMES = ["BoundType", "CPEdge", "CPEdgeType", "CPGraph", "CPNode",
                            "CriticalPathAnalysis", "restore_cpgraph"]
except ImportError as missing:  # the other reports work without it
    # The message, not the exception: `missing` is unbound once this clause ends.
    _NETWORKX_MISSING = (
        f"critical path analysis needs networkx ({missing}); install python3-networkx"
    )

    class CriticalPathAnalysis:  # type: ignore[no-redef]
        @classmethod
        def critical_path_analysis(cls, *args: Any, **kwargs: Any) -> Any:
            raise ImportError(_NETWORKX_MISSING)

        overlay_critical_path_analysis = critical_path_analysis

    _CRITICAL_PATH_NAMES = ["CriticalPathAnalysis"]

__all__ = ["TraceAnalysis", "TraceDiff", "LabeledTrace", "DeviceType", *_CRITICAL_PATH_NAMES]

# HTA's default trace_dir (hta/configs/default_values.py).
_DEFAULT_TRACE_DIR = "/tmp/trace"


# --- What runs on a dask worker -------------------------------------------------------------
# Module-level functions, so that dask pickles them by reference (the worker imports
# opscope.analysis) rather than by value.


def _read(
    path: str, max_gzip_ratio: float, max_event_size: int, times: str = "ns"
) -> "_C.TraceFile":
    """One rank's trace, read on the worker that will analyze it."""
    return _C.TraceFile(path, max_gzip_ratio, max_event_size, times)


_TIMES = ("hta", "hta_float", "ns")


def hta_times() -> str:
    """How HTA holds a trace's times now: "hta" (rounded inward to whole microseconds) unless
    ``HTA_DISABLE_NS_ROUNDING=1`` (hta/configs/env_options.py takes the flag as set only when
    it is exactly "1"), then "hta_float" (the doubles it reads)."""
    return "hta_float" if os.environ.get("HTA_DISABLE_NS_ROUNDING", "0") == "1" else "hta"


def _step_names(trace: "_C.TraceFile") -> List[str]:
    """The rank's distinct ProfilerStep#N names: the job decides from their union."""
    return trace.profiler_step_names()


def _rank(trace: "_C.TraceFile") -> int:
    return trace.rank


def _run(trace: "_C.TraceFile", report: str, options: Dict[str, Any]) -> list:
    """One report over one rank: (table name, columns, column values) tuples."""
    return _C.run_report(report, [trace], options)


def _run_all(report: str, options: Dict[str, Any], *traces: "_C.TraceFile") -> list:
    """One report over every rank at once (for what is aligned to the job's first event)."""
    return _C.run_report(report, list(traces), options)


def _write_counters(trace: "_C.TraceFile", out_path: str, options: Dict[str, Any]) -> None:
    _C.write_traces_with_counters([trace], [out_path], options)


# --- Tables into DataFrames -----------------------------------------------------------------


def _frame(columns: Sequence[str], data: Sequence[Any]) -> pd.DataFrame:
    # Column-wise from the engine (numpy arrays for numbers), so no per-row Python loop.
    return pd.DataFrame({c: v for c, v in zip(columns, data)}, columns=list(columns))


def _kernel_type_table(
    frames: List[pd.DataFrame], include_memory: bool = True
) -> pd.DataFrame:
    """HTA's kernel_type table over several ranks' own: each label's time summed over the ranks,
    sorted by that sum (largest first), with its share of the total in percent, one decimal
    (the steps and the arithmetic of HTA's get_gpu_kernel_breakdown). Without
    `include_memory`, memory kernels' time is left out, as in HTA's include_memory_kernels=False.
    """
    df = pd.concat(frames, ignore_index=True)
    if not include_memory:
        df = df[df["kernel_type"] != "MEMORY"]
        labels = df["kernel_type"].str.replace(" overlapping MEMORY", "", regex=False)
        df = df.assign(kernel_type=labels)
    df = df.groupby(by=["kernel_type"])["sum"].agg(["sum"]).reset_index()
    # Stable, so that equal sums keep the labels' alphabetical order from groupby (HTA's
    # quicksort leaves such ties in no particular order).
    df = df.sort_values(by=["sum"], ascending=False, kind="mergesort", ignore_index=True)
    df["percentage"] = (df["sum"] / df["sum"].sum()) * 100
    return df.round({"percentage": 1})


def _in_rank_order(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """A per-rank table in HTA's order: by rank (stable, each rank's rows as the engine gave
    them), except HTA's per-kernel table, sorted by kernel type, name and then rank."""
    keys = ["kernel_type", "name", "rank"] if table == "kernels" else ["rank"]
    return df.sort_values(by=keys, kind="mergesort", ignore_index=True)


def _index_per_rank(df: pd.DataFrame) -> pd.DataFrame:
    """HTA builds some tables rank by rank and concatenates them without ignore_index: each
    rank's rows are numbered from 0 again."""
    df.index = df.groupby("rank", sort=False).cumcount().to_numpy()
    return df


def _figures():
    """The module that draws visualize=True's plotly figures (imported when one is drawn)."""
    from . import _hta_methods

    return _hta_methods


class TraceAnalysis:
    """The traces of one job (one file per rank), analyzed like HTA's ``TraceAnalysis``.

    Args:
        trace_files: HTA's: a dict {rank: file} (the key is the rank, whatever the trace says)
            or a list of files; a relative name is taken inside ``trace_dir``. None: every
            trace in ``trace_dir``.
        trace_dir: the folder of the traces (HTA's default ``/tmp/trace``).
        include_last_profiler_step: keep the last ProfilerStep#N, which HTA (and so opscope)
            leaves out by default when the job's traces hold two or more distinct steps (the last
            is often cut short).
        client: a ``dask.distributed.Client`` to read and analyze each rank on a worker; its
            workers must be able to import opscope (``PYTHONPATH`` is inherited by the workers
            that ``LocalCluster`` starts). None: everything in this process.

    The traces are read here, once (as HTA loads them in its constructor); reading or
    analyzing errors are RuntimeError with opscope's message, wrong arguments ValueError.
    ``times``: how the traces' times are held: None (HTA's: "hta", rounded inward to whole
    microseconds, unless ``HTA_DISABLE_NS_ROUNDING=1``, then "hta_float", the doubles HTA
    reads), or "ns" (the nanoseconds as written). ``max_gzip_ratio`` and ``max_event_size`` are
    the limits that refuse a hostile file before it takes memory without bound (``opscope
    analyze --max-gzip-ratio``, ``--max-event-size``; 0: no limit): a gzip text that inflates
    past that many times its file's size (and 64 MiB), an event whose JSON holds more bytes.
    """

    def __init__(
        self,
        trace_files: Optional[Union[Dict[int, str], List[str]]] = None,
        trace_dir: Optional[str] = None,
        include_last_profiler_step: Optional[bool] = False,
        client: Any = None,
        max_gzip_ratio: float = 100,
        max_event_size: int = 64 << 20,
        times: Optional[str] = None,
    ) -> None:
        trace_dir = _DEFAULT_TRACE_DIR if trace_dir is None else str(trace_dir)
        # HTA's numbers by default: its rounding unless HTA_DISABLE_NS_ROUNDING=1, read now.
        if times is not None and times not in _TIMES:
            raise ValueError(f"times is one of {_TIMES} or None (HTA's), not {times!r}")
        self.times: str = hta_times() if times is None else times
        paths, given_ranks = self._trace_paths(trace_files, trace_dir)
        self._client = client
        limits = (max_gzip_ratio, max_event_size, self.times)
        self._limits = limits  # how every trace of this analyzer is read, here or elsewhere
        if client is None:
            self._traces = [_C.TraceFile(p, *limits) for p in paths]
            own_ranks = [t.rank for t in self._traces]
            step_names = [t.profiler_step_names() for t in self._traces]
        else:
            # Futures: each trace stays on the worker that read it, and later reports run there.
            # pure=False: a path names a file whose content may change between two analyses.
            self._traces = [client.submit(_read, p, *limits, pure=False) for p in paths]
            own_ranks = client.gather([client.submit(_rank, t) for t in self._traces])
            step_names = client.gather([client.submit(_step_names, t) for t in self._traces])
        # The job's decisions, once for every rank (see ReportOptions in trace_analysis.h):
        # HTA leaves the last step out when the union of all ranks' step names has two or more.
        all_steps = set().union(*step_names) if step_names else set()
        self._drop_last_step = int(not include_last_profiler_step and len(all_steps) >= 2)
        # A file's rank: the key it was given, else the trace's own, else its position.
        self._ranks: List[int] = []
        for position, own in enumerate(own_ranks):
            if given_ranks is not None:
                rank = given_ranks[position]
            else:
                rank = own if own >= 0 else position
            self._ranks.append(rank)
        if len(set(self._ranks)) != len(self._ranks):
            raise ValueError(
                f"two traces have the same rank: {dict(zip(paths, self._ranks))}; give "
                "trace_files as {rank: file}"
            )
        # The rank the engine writes for a file (its own, else its position), where the caller's
        # {rank: file} says otherwise.
        engine_ranks = [own if own >= 0 else p for p, own in enumerate(own_ranks)]
        self._relabel = (
            dict(zip(engine_ranks, self._ranks)) if engine_ranks != self._ranks else None
        )
        # Positions in rank order: HTA lists ranks sorted.
        self._order = sorted(range(len(paths)), key=lambda i: self._ranks[i])
        # HTA's Trace.trace_files: {rank: file}, in rank order.
        self.trace_files: Dict[int, str] = {self._ranks[i]: paths[i] for i in self._order}

    @staticmethod
    def _trace_paths(trace_files, trace_dir) -> Tuple[List[str], Optional[List[int]]]:
        """The job's files in their positions, and the ranks the caller gave them (or None)."""

        def inside(name: str) -> str:
            name = os.fspath(name)
            return name if os.path.isabs(name) else os.path.join(trace_dir, name)

        if trace_files is None:
            names = sorted(
                n
                for n in (os.listdir(trace_dir) if os.path.isdir(trace_dir) else [])
                if (n.endswith(".json") or n.endswith(".json.gz"))
                and os.path.isfile(os.path.join(trace_dir, n))
            )
            if not names:
                # HTA builds an analyzer of no traces here (and logs an error); so does opscope,
                # with a warning, so that a wrong folder is not silent.
                _args.warn(
                    f"opscope.analysis.TraceAnalysis: no .json or .json.gz trace in directory "
                    f"{trace_dir!r} (missing or empty); the analyzer has no traces",
                )
            return [os.path.join(trace_dir, n) for n in names], None
        if isinstance(trace_files, dict):
            ranks = sorted(trace_files)
            return [inside(trace_files[r]) for r in ranks], [int(r) for r in ranks]
        if isinstance(trace_files, (list, tuple)):
            if not trace_files:
                raise ValueError("trace_files is empty; give at least one trace")
            return [inside(f) for f in trace_files], None
        raise ValueError(
            f"trace_files must be a dict {{rank: file}} or a list of files, got "
            f"{type(trace_files).__name__}"
        )

    # --- Running reports --------------------------------------------------------------------

    def _positions_of(self, ranks: Optional[Sequence[int]]) -> List[int]:
        """The positions of the files of `ranks` (None: all), in the order given."""
        if ranks is None:
            return list(self._order)
        where = {r: i for i, r in enumerate(self._ranks)}
        missing = [r for r in ranks if r not in where]
        if missing:
            raise ValueError(
                f"rank(s) {missing} not among the traces' ranks {sorted(self._ranks)}"
            )
        return [where[r] for r in ranks]

    def _report(
        self, report: str, options: Dict[str, Any], ranks: Optional[Sequence[int]] = None
    ) -> Dict[str, pd.DataFrame]:
        """{table name: DataFrame} of `report` over every rank, or only over `ranks`."""
        options = dict(options, drop_last_step=self._drop_last_step)
        if self._client is None and ranks is None:
            # One engine call over every rank, in their positions (so first_position is 0).
            tables = _C.run_report(report, self._traces, dict(options, first_position=0))
            out = {}
            for name, columns, data in tables:
                df = _frame(columns, data)
                if self._relabel is not None and "rank" in df.columns:
                    df["rank"] = df["rank"].map(self._relabel)
                    df = _in_rank_order(name, df)
                out[name] = df
            return out
        positions = self._positions_of(ranks)
        # Each rank apart (on its worker when there is a client), told its position and the
        # job's step decision; the tables are put together here.
        if self._client is None:
            per_rank = [
                _run(self._traces[i], report, dict(options, first_position=i)) for i in positions
            ]
        else:
            per_rank = self._client.gather(
                [
                    self._client.submit(
                        _run, self._traces[i], report, dict(options, first_position=i)
                    )
                    for i in positions
                ]
            )
        return self._combine(per_rank, positions)

    def _combine(self, per_rank: List[list], positions: List[int]) -> Dict[str, pd.DataFrame]:
        frames: Dict[str, List[pd.DataFrame]] = {}
        for i, tables in zip(positions, per_rank):
            for name, columns, data in tables:
                df = _frame(columns, data)
                if "rank" in df.columns:
                    df["rank"] = self._ranks[i]
                frames.setdefault(name, []).append(df)
        out = {}
        for name, dfs in frames.items():
            if name == "kernel_type":
                out[name] = _kernel_type_table(dfs)
                continue
            out[name] = _in_rank_order(name, pd.concat(dfs, ignore_index=True))
        return out

    @staticmethod
    def _require(report: str, method: str) -> None:
        if report not in {k[0] for k in _C.report_kinds()}:
            raise NotImplementedError(
                f"{method}: this build of opscope has no '{report}' report"
            )

    # --- HTA's methods ----------------------------------------------------------------------

    def get_idle_time_breakdown(
        self,
        ranks: Optional[List[int]] = None,
        streams: Optional[List[int]] = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """Per rank and stream, the GPU's idle time by cause (host_wait, kernel_wait, other), as
        (DataFrame, None), or (DataFrame, interval statistics) with show_idle_interval_stats.
        ``ranks`` defaults to [0], as in HTA; ``streams`` to every stream.
        ``consecutive_kernel_delay`` is in us (HTA's docstring says ns; its code uses us).
        ``show_idle_interval_stats=True``: the second table is HTA's, per rank, stream and
        idle category (the index), describe() of the idle intervals (us, 2 decimals)."""
        if not ranks:
            ranks = [0]
        tables = self._report(
            "idle", {"consecutive_kernel_delay_us": float(consecutive_kernel_delay)}, ranks
        )
        df = tables["idle"]
        if streams:
            df = df[df["stream"].isin(list(streams))]
        if visualize:
            _figures().draw_idle(df, visualize_pctg)
        stats = None
        if show_idle_interval_stats:
            stats = _figures().idle_interval_stats(tables["idle_intervals"], ranks, streams)
        return _index_per_rank(df.reset_index(drop=True)), stats

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """(kernel_type_df, kernel_df) over every rank: GPU time by kernel type and their
        overlaps, and per rank and type the top kernels' statistics, the rest as "others"."""
        tables = self._report(
            "kernels", {"duration_ratio": float(duration_ratio), "num_kernels": int(num_kernels)}
        )
        kernel_type, kernels = tables["kernel_type"], tables["kernels"]
        if not include_memory_kernels:
            # HTA then analyzes COMPUTATION and COMMUNICATION only. The engine's type table cuts
            # time by the set of types running; leaving MEMORY out of every set and summing
            # again gives the cut over the other two (HTA truncates each piece to whole us, so
            # a piece that memory split in two may differ by 1 us).
            kernels = kernels[kernels["kernel_type"] != "MEMORY"].reset_index(drop=True)
            kernel_type = _kernel_type_table([kernel_type], include_memory=False)
        if visualize:
            _figures().draw_kernel_breakdown(kernel_type, kernels, image_renderer)
        return kernel_type, kernels

    def get_cuda_kernel_launch_stats(
        self,
        ranks: Optional[List[int]] = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> Dict[int, pd.DataFrame]:
        """{rank: DataFrame} of every GPU kernel (and, with ``include_memory_events``, memcpy and
        memset) with the runtime call that launched it: cpu_duration, gpu_duration and
        launch_delay (us) per correlation id. ``ranks`` defaults to [0], as in HTA. The cutoffs
        only pick the outliers of HTA's plots (and of opscope's launch_summary table,
        ``opscope analyze --report launch``); the DataFrames are not filtered by them."""
        self._require("launch", "get_cuda_kernel_launch_stats")
        if not ranks:
            ranks = [0]
        options = {
            "runtime_cutoff_us": float(runtime_cutoff),
            "launch_delay_cutoff_us": float(launch_delay_cutoff),
            "include_memory_events": bool(include_memory_events),
        }
        launches = self._report("launch", options, ranks)["launch"]
        out = {
            rank: launches[launches["rank"] == rank].drop(columns="rank").reset_index(drop=True)
            for rank in ranks
        }
        if visualize:
            for rank, df in out.items():
                _figures().draw_launch_stats(rank, df, runtime_cutoff, launch_delay_cutoff)
        return out

    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> pd.DataFrame:
        """The kernel sequences launched by the shallowest CPU operators whose name contains
        ``operator_name`` (at least ``min_pattern_len`` kernels each) on ``rank``: pattern
        ("operator|kernel|kernel..."), count and the summed GPU and CPU durations (us), most
        frequent first. An empty ``operator_name`` gives an empty DataFrame, as in HTA.

        HTA also writes the trace with the top_k patterns overlaid into ``output_dir``; opscope
        writes nothing there (``top_k`` and ``compress_other_kernels`` only shape that file),
        and warns that it did not."""
        self._require("patterns", "get_frequent_cuda_kernel_sequences")
        if not operator_name:
            return pd.DataFrame()
        _args.warn(
            "opscope.analysis.TraceAnalysis.get_frequent_cuda_kernel_sequences: the trace with "
            f"the patterns overlaid is not written to {output_dir!r} (opscope returns the "
            "DataFrame only)",
        )
        options = {"operator_name": str(operator_name), "min_pattern_len": int(min_pattern_len)}
        df = self._report("patterns", options, [rank])["patterns"]
        if df.empty:
            return pd.DataFrame()  # HTA's answer when no operator matches: no columns either
        df = df.drop(columns="rank").reset_index(drop=True)
        if visualize:
            _figures().draw_patterns(df, top_k, rank)
        return df

    def _describe_table(
        self, report: str, method: str, table: str, series: str, ranks: Optional[List[int]]
    ) -> Optional[pd.DataFrame]:
        """A describe() table of `report` (the columns before "count" are its keys, rank
        first) as HTA's groupby([rank, key]).describe() frame: index (rank, key), columns
        (series, statistic). None where HTA's is: when no rank asked for has a time series
        (get_queue_length_summary, get_memory_bw_summary: HTA describes each rank's
        get_*_time_series, so a rank with a series but no row, as copies without a bandwidth,
        gives an empty frame)."""
        self._require(report, method)
        df = self._report(report, {}, ranks or [0])[table]
        series_method = getattr(self, method.replace("_summary", "_time_series"), None)
        if df.empty and series_method is not None and not series_method(ranks or [0]):
            return None
        df = df.set_index(list(df.columns[: list(df.columns).index("count")]))
        df["count"] = df["count"].astype("float64")  # describe()'s dtype
        df.columns = pd.MultiIndex.from_product([[series], list(df.columns)])
        return df

    def _series(
        self, report: str, method: str, table: str, ranks: Optional[List[int]]
    ) -> Dict[int, pd.DataFrame]:
        """{rank: DataFrame} of a table of a time-series report ("counters"). Its ts counts
        microseconds from the job's first event (HTA aligns every rank to it), so the report runs
        over every rank at once: in this process, or in one task on the client (the traces
        re-read there)."""
        self._require(report, method)
        options = {"drop_last_step": self._drop_last_step, "first_position": 0}
        if self._client is None:
            tables = _C.run_report(report, self._traces, options)
        else:
            tables = self._client.submit(_run_all, report, options, *self._traces).result()
        df = {name: _frame(columns, data) for name, columns, data in tables}[table]
        if self._relabel is not None:
            df["rank"] = df["rank"].map(self._relabel)
        return {
            rank: df[df["rank"] == rank].drop(columns="rank").reset_index(drop=True)
            for rank in (ranks or [0])
            if (df["rank"] == rank).any()
        }

    def get_time_spent_blocked_on_full_queue(
        self,
        queue_length_dict: Optional[Dict[int, pd.DataFrame]],
        max_queue_length: int = 1024,
        all_streams: bool = False,
    ) -> Optional[pd.DataFrame]:
        """Per rank (the keys of ``queue_length_dict``, HTA's argument) whose launch queue
        reached ``max_queue_length`` on some stream: that stream, duration_at_max_queue_length
        (us) and its share of the rank's trace. HTA's answer by default: one row per rank, for
        the stream of the highest number among those that reached it (HTA goes through the
        streams in order and keeps the last), and an empty DataFrame when no queue was full.
        ``all_streams=True``: opscope's fuller table, a row for every such stream (as
        ``opscope analyze --report queue`` prints it). None when ``queue_length_dict`` is
        None."""
        self._require("queue", "get_time_spent_blocked_on_full_queue")
        if queue_length_dict is None:
            return None
        columns = ["rank", "stream", "duration_at_max_queue_length",
                   "relative_duration_at_max_queue_length"]
        if not queue_length_dict:
            return pd.DataFrame(columns=columns)
        table = self._report(
            "queue", {"max_queue_length": int(max_queue_length)}, sorted(queue_length_dict)
        )["queue_full"]
        table = table.sort_values(by=["rank", "stream"], kind="mergesort", ignore_index=True)
        if not all_streams:
            table = table.groupby("rank", sort=True).tail(1)
        return table.reset_index(drop=True)

    def generate_trace_with_counters(
        self,
        time_series: Any = None,
        ranks: Optional[List[int]] = None,
        output_suffix: str = "_with_counters",
    ) -> None:
        """Writes each rank's trace (``ranks`` defaults to [0]) again beside it, its name with
        ``output_suffix`` before ".json", with HTA's "Queue Length" and "Memcpy BW" counter
        events appended; every original event stays as it was. ``time_series`` is accepted for
        HTA's signature: both series are always written. Unlike HTA, a ``.json`` name gives a
        plain file (HTA gzips whatever the name). Each file goes through
        ``opscope.analysis.Trace.write_raw_trace(output_file, trace_contents)`` as HTA's goes
        through its ``Trace.write_raw_trace``: patched, it receives the trace as a mapping
        (``RawTrace``, parsed when read) and nothing is written."""
        self._require("queue", "generate_trace_with_counters")
        suffix = output_suffix or "_with_counters"
        options = {"drop_last_step": self._drop_last_step}
        for i in self._positions_of(ranks or [0]):
            path = self.trace_files[self._ranks[i]]
            out = path.replace(".json", suffix + ".json")
            written = RawTrace.temporary_beside(out)
            raw = RawTrace(written, temporary=True)
            if self._client is None:
                _write_counters(self._traces[i], written, options)
            else:
                self._client.submit(_write_counters, self._traces[i], written, options).result()
            Trace().write_raw_trace(out, raw)

    # --- Critical path analysis (python/opscope/_critical_path.py) ---------------------------

    def _trace_file_of_rank(self, rank: int) -> "_C.TraceFile":
        """The rank's trace in this process (read here when a dask worker holds it)."""
        (i,) = self._positions_of([rank])
        if self._client is None:
            return self._traces[i]
        return _C.TraceFile(self.trace_files[self._ranks[i]], *self._limits)

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str,
        instance_id: Union[Optional[int], Tuple[int, int]],
        data_load_events: Optional[List[str]] = None,
    ) -> Optional[Tuple["CPGraph", bool]]:
        """HTA's critical path analysis of one rank within the instances of ``annotation`` (a
        part of event names; "" the whole trace); ``instance_id``: None (the first), an int, or
        (start, end) inclusive. Returns (CPGraph, success), or None when no event has such a
        name. CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1 adds HTA's zero-weight launch
        edges. The graph is built in C++; see opscope._critical_path for what differs."""
        return CriticalPathAnalysis.critical_path_analysis(
            self, rank, annotation, instance_id, data_load_events
        )

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: "CPGraph",
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """Writes HTA's overlaid trace of the critical path (gzip JSON named
        "overlaid_critical_path_<trace file>" in ``output_dir``) and returns its path."""
        return CriticalPathAnalysis.overlay_critical_path_analysis(
            self, rank, critical_path_graph, output_dir, only_show_critical_events,
            show_all_edges,
        )

# --- Methods made from the report catalog -----------------------------------------------------
# Each report's catalog row (src/analysis/reports/<name>.cpp) names the HTA methods it answers
# and, for those of a common shape, their form: those are made here, with the row's docstring,
# so that a new report of such a shape reaches Python without an edit of this file. The others
# ("hand_written") are TraceAnalysis's own methods above: HTA's signature needs more.


def _job_table_method(report: str, method: str, table: str, series: str):
    def get(self, visualize: bool = True) -> pd.DataFrame:
        df = self._report(report, {})[table]
        if visualize:
            _figures().draw_job_table(method, df)
        return df

    return get


def _rank_table_method(report: str, method: str, table: str, series: str):
    def get(self, ranks: Optional[List[int]] = None) -> pd.DataFrame:
        return self._report(report, {}, ranks)[table]

    return get


def _describe_method(report: str, method: str, table: str, series: str):
    def get(self, ranks: Optional[List[int]] = None) -> Optional[pd.DataFrame]:
        return self._describe_table(report, method, table, series, ranks)

    return get


def _series_method(report: str, method: str, table: str, series: str):
    def get(self, ranks: Optional[List[int]] = None) -> Dict[int, pd.DataFrame]:
        return self._series(report, method, table, ranks)

    return get


_FORMS = {"job_table": _job_table_method, "rank_table": _rank_table_method,
          "describe": _describe_method, "series": _series_method}


def _add_catalog_methods(cls: type) -> None:
    for report, _hta, _summary, _options, methods in _C.report_kinds():
        for name, table, form, doc, series in methods:
            if form not in _FORMS:
                continue  # hand-written in the class
            method = _FORMS[form](report, name, table, series)
            method.__name__ = name
            method.__qualname__ = f"{cls.__name__}.{name}"
            method.__doc__ = doc
            setattr(cls, name, method)


_add_catalog_methods(TraceAnalysis)


class TraceDiff:
    """HTA's ``TraceDiff`` (``hta.trace_diff``): two runs compared operator by operator and kernel
    by kernel, by opscope's C++ engine (``opscope analyze diff``)."""

    @staticmethod
    def _traces(side: Any) -> List["_C.TraceFile"]:
        """The traces of one side; those read here hold their times as HTA's TraceDiff does
        (hta_times(): rounded unless HTA_DISABLE_NS_ROUNDING=1); a TraceAnalysis's its own."""
        if isinstance(side, TraceAnalysis):
            if side._client is not None:
                return [_C.TraceFile(p, *side._limits) for p in side.trace_files.values()]
            return [side._traces[i] for i in side._order]
        path = os.fspath(side)
        if os.path.isdir(path):
            names = sorted(
                n for n in os.listdir(path)
                if (n.endswith(".json") or n.endswith(".json.gz"))
                and os.path.isfile(os.path.join(path, n))
            )
            if not names:
                raise ValueError(f"no .json or .json.gz trace in directory {path!r}")
            return [_C.TraceFile(os.path.join(path, n), times=hta_times()) for n in names]
        return [_C.TraceFile(path, times=hta_times())]

    @staticmethod
    def _as_list(value: Union[None, int, Sequence[int]]) -> List[int]:
        if value is None:
            return []
        return [int(value)] if isinstance(value, int) else [int(v) for v in value]

    @staticmethod
    def _tables(control, test, control_rank, test_rank, control_iteration, test_iteration,
                device_type, use_short_name) -> Dict[str, pd.DataFrame]:
        device = getattr(device_type, "name", device_type)
        control_traces, control_label = _figures().diff_side(control, "Control")
        test_traces, test_label = _figures().diff_side(test, "Test")
        if control_label == test_label:
            test_label = f"{test_label}_control_test"  # HTA renames the test side so
        options = {
            "control_ranks": TraceDiff._as_list(control_rank),
            "test_ranks": TraceDiff._as_list(test_rank),
            "control_iterations": TraceDiff._as_list(control_iteration),
            "test_iterations": TraceDiff._as_list(test_iteration),
            "device": str(device).upper(),
            "short_names": bool(use_short_name),
            "control_label": control_label,
            "test_label": test_label,
        }
        tables = _C.trace_diff(control_traces, test_traces, options)
        return {name: _frame(columns, data) for name, columns, data in tables}

    @staticmethod
    def compare_traces(
        control: Any,
        test: Any,
        control_rank: Union[None, int, List[int]] = None,
        test_rank: Union[None, int, List[int]] = None,
        control_iteration: Union[None, int, List[int]] = None,
        test_iteration: Union[None, int, List[int]] = None,
        device_type: Any = "ALL",
        use_short_name: bool = False,
    ) -> pd.DataFrame:
        """Per operator and kernel name (the index, ``name`` or ``short_name``): <label>_counts,
        <label>_total_duration for each side (us), diff_counts, diff_duration and
        counts_change_categories ("+", "-", "="). ``control`` and ``test``: a LabeledTrace
        (opscope's or HTA's; its label names the columns), a TraceAnalysis, a trace directory
        or a trace file (labels "Control" and "Test"). Ranks and iterations default to the
        smallest of each side; ``device_type`` is "ALL", "CPU", "GPU" or HTA's DeviceType."""
        df = TraceDiff._tables(control, test, control_rank, test_rank, control_iteration,
                               test_iteration, device_type, use_short_name)["ops_diff"]
        key = df.columns[0]  # "name", or "short_name" with use_short_name
        return df.set_index(key).rename_axis("short_name" if use_short_name else "name")

    @staticmethod
    def ops_diff(
        control: Any,
        test: Any,
        control_rank: Union[None, int, List[int]] = None,
        test_rank: Union[None, int, List[int]] = None,
        control_iteration: Union[None, int, List[int]] = None,
        test_iteration: Union[None, int, List[int]] = None,
        device_type: Any = "ALL",
    ) -> Dict[str, List[str]]:
        """{"added", "deleted", "increased", "decreased", "unchanged"}: the names in each."""
        summary = TraceDiff._tables(control, test, control_rank, test_rank, control_iteration,
                                    test_iteration, device_type, False)["ops_summary"]
        out: Dict[str, List[str]] = {
            k: [] for k in ("added", "deleted", "increased", "decreased", "unchanged")
        }
        for category, name in zip(summary["category"], summary["name"]):
            out[category].append(name)
        return out


# --- The rest of HTA's API (python/opscope/_hta_methods.py) ---------------------------------
from . import _hta_methods  # noqa: E402  (it reads this module's helpers)
from ._hta_methods import DeviceType, LabeledTrace, SymbolTable, TraceView  # noqa: E402,F401

_hta_methods.install(TraceAnalysis, TraceDiff)
