"""The rest of HTA's public API on opscope.analysis: the TraceAnalysis methods that need more than
a catalog form, HTA's Trace-shaped view (``TraceAnalysis.t``), ``LabeledTrace``, TraceDiff's
labels and figures, and the plotly figures that ``visualize=True`` draws.

The work over events is done by the engine's reports (src/analysis/reports/: ``events``,
``annotations``, ``aten-launch``, ``cupti-counters``; ``opscope analyze --report NAME`` gives the
same tables); what is here reshapes their tables into HTA's DataFrames. ``install()`` adds the
methods to the classes of opscope.analysis, which imports this module last.
"""

import os
import random
import re
from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import _C

# --- Figures ------------------------------------------------------------------------------
# plotly is imported when a figure is drawn: a caller who never passes visualize=True needs
# only pandas. Each builder draws from the DataFrames the method returns the figures HTA's
# method draws from its own (the same kind, axes and titles), and shows them as HTA does.


def _plotly():
    try:
        import plotly.express as px
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError as e:
        raise ImportError(
            f"visualize=True draws with plotly, which cannot be imported here ({e}); install "
            "it: apt-get install python3-plotly (Debian, Ubuntu) or pip install plotly, or "
            "pass visualize=False for the DataFrames alone",
            name="plotly",
        ) from e

    return px, go, make_subplots


def _show(fig: Any, renderer: Optional[str] = None) -> Any:
    """fig.show() as HTA calls it: with the caller's renderer ("notebook", ...) when given."""
    if renderer:
        fig.show(renderer=renderer)
    else:
        fig.show()
    return fig


def _rank_pies(per_rank: Dict[int, pd.DataFrame], title: str, n_ranks: int, renderer):
    """HTA's grid of pies, two per row, one per rank: each name's share of the rank's sum."""
    _, go, make_subplots = _plotly()
    specs = [[{"type": "domain"}, {"type": "domain"}] for _ in range((len(per_rank) + 1) // 2)]
    fig = make_subplots(rows=max(1, (len(per_rank) + 1) // 2), cols=2, specs=specs or None)
    for position, (rank, df) in enumerate(sorted(per_rank.items())):
        fig.add_trace(
            go.Pie(labels=df["name"], values=df["sum (us)"], title=f"Rank {rank}",
                   automargin=False),
            position // 2 + 1,
            position % 2 + 1,
        )
    fig.update_layout(
        title_text=title,
        margin=dict(l=50, r=50, b=50, t=50),
        showlegend=True,
        height=400 * (1 + n_ranks / 2),
        legend=dict(yanchor="bottom", y=-0.1, xanchor="left", x=0),
    )
    _show(fig, renderer)


def _mean_bars(df: pd.DataFrame, title: Callable[[str], str], renderer) -> None:
    """HTA's bar per name over the ranks: the mean duration, whiskers to min and max."""
    px, _, _ = _plotly()
    for name in df["name"].unique():
        if name == "others":
            continue
        one = df[df["name"].eq(name)]
        fig = px.bar(
            one, x="rank", y="mean (us)", title=name,
            labels={"rank": "Rank", "mean (us)": "Mean Duration (us)"},
            error_y=one["max (us)"] - one["mean (us)"],
            error_y_minus=one["mean (us)"] - one["min (us)"],
        )
        fig.update_layout(title_text=title(name), xaxis=dict(tickmode="linear", tick0=0, dtick=1))
        _show(fig, renderer)


def draw_temporal(df: pd.DataFrame) -> None:
    px, _, _ = _plotly()
    shares = pd.DataFrame({
        "rank": df["rank"],
        "idle_time": df["idle_time_pctg"] / 100,
        "compute_time": df["compute_time_pctg"] / 100,
        "non_compute_time": df["non_compute_time_pctg"] / 100,
    })
    fig = px.bar(shares, x="rank", y=["idle_time", "compute_time", "non_compute_time"],
                 title="Temporal breakdown across ranks", labels={"rank": "Rank"})
    fig.update_layout(yaxis_tickformat=".2%", yaxis_title="Percentage",
                      legend_title="Time Breakdown")
    _show(fig)


def draw_overlap(df: pd.DataFrame) -> None:
    px, _, _ = _plotly()
    ratio = pd.DataFrame({"rank": df["rank"],
                          "comp_comm_overlap_ratio": df["comp_comm_overlap_pctg"] / 100})
    fig = px.bar(ratio, x="rank", y="comp_comm_overlap_ratio",
                 title="Computation-Communication Overlap",
                 labels={"rank": "Rank", "comp_comm_overlap_ratio":
                         "Computation-Communication Overlap Percentage"})
    fig.update_layout(yaxis_tickformat=".2%")
    _show(fig)


def draw_table(df: pd.DataFrame, title: str) -> None:
    """A DataFrame as a plotly table: the figure of a method HTA draws no chart for."""
    _, go, _ = _plotly()
    fig = go.Figure(data=[go.Table(header={"values": list(df.columns)},
                                   cells={"values": [df[c] for c in df.columns]})])
    fig.update_layout(title=title)
    _show(fig)


def draw_job_table(method: str, df: pd.DataFrame) -> None:
    """The figure of a catalog method of the job_table form (``visualize`` argument only): HTA's
    chart for the methods HTA has, the table itself for a report added to the catalog since."""
    drawers = {"get_temporal_breakdown": draw_temporal, "get_comm_comp_overlap": draw_overlap}
    if method in drawers:
        drawers[method](df)
    else:
        draw_table(df, method)


def draw_kernel_breakdown(kernel_type: pd.DataFrame, kernels: pd.DataFrame,
                          renderer: str = "") -> None:
    px, _, _ = _plotly()
    fig = px.pie(kernel_type[kernel_type["percentage"] > 0], values="percentage",
                 names="kernel_type", height=500, title="Kernel Type Percentage Across All Ranks")
    fig.update_layout(margin=dict(l=50, r=50, b=50, t=50), showlegend=True,
                      legend=dict(yanchor="bottom", y=-0.4, xanchor="left", x=0))
    _show(fig, renderer)
    n_ranks = kernels["rank"].nunique()
    for ktype in kernels["kernel_type"].unique():
        of_type = kernels[kernels["kernel_type"].eq(ktype)]
        per_rank = {int(r): d for r, d in of_type.groupby("rank")}
        _rank_pies(per_rank, f'Kernel type "{ktype}" - kernel distribution on each rank',
                   n_ranks, renderer)
        _mean_bars(of_type, lambda name, k=ktype: f'Kernel type "{k}" - {name}', renderer)


def draw_idle(df: pd.DataFrame, visualize_pctg: bool) -> None:
    px, _, _ = _plotly()
    for rank, one in df.groupby("rank", sort=True):
        one = one.assign(stream=one["stream"].astype(str))  # HTA plots streams as categories
        ycol = "idle_time_ratio" if visualize_pctg else "idle_time"
        fig = px.bar(one, x="stream", y=ycol, color="idle_category",
                     hover_data=["idle_time", "idle_time_ratio"],
                     title=f"Idle time breakdown on rank {rank} per CUDA stream")
        if visualize_pctg:
            fig.update_layout(yaxis_tickformat=".2%", yaxis_title="Percentage",
                              legend_title="Idle Time Breakdown")
        else:
            fig.update_layout(yaxis_title="Idle time (us)", legend_title="Idle Time Breakdown")
        _show(fig)


def draw_launch_stats(rank: int, df: pd.DataFrame, runtime_cutoff, launch_delay_cutoff) -> None:
    px, _, _ = _plotly()
    short = df[(df["cpu_duration"] <= runtime_cutoff) & (df["gpu_duration"] < df["cpu_duration"])]
    runtime = df[df["cpu_duration"] > runtime_cutoff]
    delay = df[df["launch_delay"] > launch_delay_cutoff]
    _show(px.histogram(
        short, x=short["cpu_duration"],
        title="Short GPU kernels (gpu op duration < cpu op duration) on rank %d" % rank,
        labels={"cpu_duration": "Cuda Runtime Event Duration (us)"}))
    _show(px.histogram(
        runtime, x=runtime["cpu_duration"], nbins=300,
        title="Runtime Event Duration Outliers (duration > %s us)  on rank %d"
        % (runtime_cutoff, rank),
        labels={"cpu_duration": "Cuda Runtime Event Duration (us)"}))
    _show(px.histogram(
        delay, x=delay["launch_delay"], nbins=300,
        title="Launch Delay Outliers (duration > %s us) on rank %d" % (launch_delay_cutoff, rank),
        labels={"launch_delay": "Launch Delay Duration (us)"}))


def draw_patterns(df: pd.DataFrame, top_k: int, rank: int) -> None:
    px, _, _ = _plotly()
    vis = df[:top_k].copy()
    vis["pattern"] = vis["pattern"].str.replace("|", "<br>", regex=False)
    fig = px.bar(vis, x=vis.index, y="count", hover_data=["pattern", "count"],
                 title=f"Top {top_k} frequent patterns for rank {rank}",
                 labels={"x": "Pattern Index", "count": "Pattern Count"})
    fig.update_xaxes(type="category")
    _show(fig)


def draw_annotations(df: pd.DataFrame, n_ranks: int, renderer) -> None:
    per_rank = {int(r): d for r, d in df.groupby("rank")}
    _rank_pies(per_rank, "User annotation distribution on each rank", n_ranks, renderer)
    _mean_bars(df, lambda name: f"User annotation = {name}", renderer)


def draw_aten_table(rank: int, df: pd.DataFrame) -> None:
    _, go, _ = _plotly()
    fig = go.Figure(data=[go.Table(
        header={"values": ["ATen Operation", "Kernel Sequence", "Occurrence Count",
                           "Average ATen Op Launch Delay (us)", "Average Runtime Delay (us)"]},
        cells={"values": [df["aten_op_name"], df["kernel_sequence"], df["occurrence_count"],
                          df["avg_aten_op_launch_delay"], df["avg_runtime_delay"]],
               "height": 30, "align": "left"},
    )])
    fig.update_layout(
        title="ATen Operations, Associated Kernels, ATen and Runtime Delays for Rank %s" % rank,
        width=1500, height=1500, autosize=True, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    _show(fig)


def _diff_bars(df: pd.DataFrame, what: str, title: str, show_image: bool,
               export_image_path: Optional[str]) -> None:
    import plotly.graph_objects as go  # looked up at the call: a test may patch go.Figure

    labels = [c[: -len("_total_duration")] for c in df.columns if c.endswith("_total_duration")]
    if len(labels) < 2:
        raise ValueError(
            "expected the DataFrame of TraceDiff.compare_traces, with two <label>_total_duration "
            f"columns; got columns {list(df.columns)}")
    column = "counts" if what == "counts" else "total_duration"
    diff = "diff_counts" if what == "counts" else "diff_duration"
    fig = go.Figure(data=[
        go.Bar(name=labels[0], x=df.index, y=df[f"{labels[0]}_{column}"]),
        go.Bar(name=labels[1], x=df.index, y=df[f"{labels[1]}_{column}"]),
        go.Bar(name="Difference", x=df.index, y=df[diff]),
    ])
    fig.update_layout(barmode="group", title_text=title)
    if show_image:
        fig.show()
    if export_image_path:
        fig.write_image(export_image_path)


# --- HTA's Trace, as a view of the engine's "events" table --------------------------------


class SymbolTable:
    """HTA's TraceSymbolTable over the names and categories of a job's events: each distinct
    string has an id (its position in ``sym_table``), and the trace frames hold ids."""

    def __init__(self, symbols: Sequence[str]) -> None:
        self.sym_table: List[str] = list(symbols)
        self.sym_index: Dict[str, int] = {s: i for i, s in enumerate(self.sym_table)}

    def get_sym_table(self) -> List[str]:
        return self.sym_table

    def get_sym_id_map(self) -> Dict[str, int]:
        return self.sym_index

    def get_sym_table_series(self) -> pd.Series:
        return pd.Series(self.sym_table)

    def get_sym_index_series(self) -> pd.Series:
        return pd.Series(self.sym_index, dtype="int64")

    def add_symbols_to_trace_df(self, df: pd.DataFrame, col: str) -> None:
        """Replaces the ids of column ``col`` by their strings, in place (HTA's)."""
        table = np.asarray(self.sym_table + [""], dtype=object)  # -1: ""
        df[col] = table[df[col].to_numpy()]

    def find_matched_symbols(self, patterns: List[str]) -> List[str]:
        """The symbols holding any of `patterns` (as HTA: literal text, re.escape'd)."""
        pattern = re.compile("|".join(re.escape(p) for p in patterns))
        return [s for s in self.sym_table if pattern.search(s)]

    def get_symbol_ids(self, pattern: Any) -> Dict[str, int]:
        """HTA's: the ids of the symbols `pattern` (a GroupingPattern or a regex) re.match-es."""
        regex = getattr(pattern, "pattern", pattern)
        inverse = getattr(pattern, "inverse_match", False)
        s = self.get_sym_index_series()
        mask = s.index.str.match(regex)
        return s[~mask if inverse else mask].to_dict()


class TraceView:
    """What HTA's ``Trace`` offers of its data, from the engine's "events" report: ``traces``
    ({rank: DataFrame}), ``get_trace(rank)``, ``get_all_traces()``, ``symbol_table``,
    ``trace_files``. A frame has HTA's columns: ts (us from the job's first event), dur (us),
    name and cat (symbol ids), pid, tid, stream (-1 on the CPU), correlation, index,
    index_correlation, iteration (-1: none), parent (row, -1), depth. It is built on first use
    and read only by the caller: opscope's methods do not read it, so changing it changes no
    analysis."""

    def __init__(self, analysis: Any) -> None:
        self.trace_files: Dict[int, str] = dict(analysis.trace_files)
        self.trace_path = os.path.dirname(next(iter(self.trace_files.values()), ""))
        self.is_parsed = True
        tables = job_tables(analysis, "events")
        frame = tables["events"]
        self.symbol_table = SymbolTable(list(tables["symbols"]["symbol"]))
        columns = ["index", "ts", "dur", "pid", "tid", "name", "cat", "stream", "correlation",
                   "index_correlation", "iteration", "parent", "depth"]
        self.traces: Dict[int, pd.DataFrame] = {}
        for rank in analysis.trace_files:
            one = frame[frame["rank"] == rank][columns].reset_index(drop=True)
            self.traces[int(rank)] = one

    def get_trace(self, rank: int) -> pd.DataFrame:
        if rank not in self.traces:
            raise ValueError(f"rank {rank} is not among the traces' ranks {sorted(self.traces)}")
        return self.traces[rank]

    def get_all_traces(self) -> Dict[int, pd.DataFrame]:
        return self.traces

    def get_ranks(self) -> List[int]:
        return sorted(self.traces)


def job_tables(analysis: Any, report: str, options: Optional[Dict[str, Any]] = None
               ) -> Dict[str, pd.DataFrame]:
    """{table: DataFrame} of `report` run over every rank at once (its times count from the
    job's first event), with the ranks the caller gave."""
    from .analysis import _frame, _run_all

    analysis._require(report, report)
    opts = dict(options or {}, drop_last_step=analysis._drop_last_step, first_position=0)
    if analysis._client is None:
        tables = _C.run_report(report, analysis._traces, opts)
    else:
        tables = analysis._client.submit(_run_all, report, opts, *analysis._traces).result()
    out = {}
    for name, columns, data in tables:
        df = _frame(columns, data)
        if analysis._relabel is not None and "rank" in df.columns:
            df["rank"] = df["rank"].map(analysis._relabel)
        out[name] = df
    return out


def _trace_view(self) -> TraceView:
    view = self.__dict__.get("_trace_view")
    if view is None:
        view = self.__dict__["_trace_view"] = TraceView(self)
    return view


# --- TraceAnalysis's methods --------------------------------------------------------------


def _fold_others(df: pd.DataFrame, num_kernels: int, duration_ratio: float,
                 allowlist_names: Optional[List[str]]) -> pd.DataFrame:
    """HTA's _aggr_gpu_kernel_time after its groupby: one rank's rows (name, sum, max, min,
    mean, std) largest sum first; past num_kernels names, those beyond the top num_kernels or
    past duration_ratio of the cumulative sum become "others" (unless allow-listed), and every
    name is then summarized over its sums, as HTA's second groupby does."""
    df = df.sort_values(by=["sum"], ascending=False, kind="mergesort", ignore_index=True)
    df = df.fillna({"std": 0})
    if df.shape[0] <= num_kernels:
        return df
    keep = df["name"].isin(allowlist_names) if allowlist_names is not None else df["sum"] < 0
    cumsum = df["sum"].cumsum()
    df.loc[~keep & (cumsum > cumsum.quantile(duration_ratio)), "name"] = "others"
    df.loc[~keep & (df.index >= num_kernels), "name"] = "others"
    df = df.groupby(by=["name"])["sum"].agg(["sum", "max", "min", "mean", "std"]).reset_index()
    return df.fillna({"std": 0})


def get_gpu_user_annotation_breakdown(
    self,
    use_gpu_annotation: bool = True,
    visualize: bool = True,
    duration_ratio: float = 0.8,
    num_kernels: int = 1000,
    allowlist_patterns: Optional[List[str]] = None,
    image_renderer: Optional[str] = None,
) -> Optional[pd.DataFrame]:
    """Per rank and user annotation (``gpu_user_annotation``: its span on the GPU; with
    ``use_gpu_annotation=False``, ``user_annotation``: on the CPU): sum, max, min, mean (us)
    and stddev of its durations, sorted by rank and name. Past ``num_kernels`` annotations of a
    rank, those beyond the top ``num_kernels`` or past ``duration_ratio`` of the cumulative
    time are summed as "others", except those holding one of ``allowlist_patterns`` (literal
    text, as HTA matches them). None when the traces have no such annotation, as in HTA."""
    cat = "gpu_user_annotation" if use_gpu_annotation else "user_annotation"
    table = self._report("annotations", {})["annotations"]
    table = table[table["cat"] == cat]
    if table.empty:
        return None
    allowlist_names = None
    if allowlist_patterns is not None:
        pattern = re.compile("|".join(re.escape(p) for p in allowlist_patterns))
        allowlist_names = [n for n in table["name"].unique() if pattern.search(n)]
    frames = []
    for rank in sorted(self._ranks):
        one = table[table["rank"] == rank][["name", "sum", "max", "min", "mean", "std"]]
        one = _fold_others(one.reset_index(drop=True), int(num_kernels), float(duration_ratio),
                           allowlist_names)
        one["rank"] = int(rank)
        frames.append(one)
    # HTA's column order: that of the empty frame it concatenates the ranks' onto.
    df = pd.concat(frames, ignore_index=True)[["name", "sum", "max", "min", "std", "mean", "rank"]]
    df = df.sort_values(by=["rank", "name"], ignore_index=True, kind="mergesort")
    df = df.rename(columns={"sum": "sum (us)", "mean": "mean (us)", "max": "max (us)",
                            "min": "min (us)", "std": "stddev"})
    if visualize:
        draw_annotations(df, len(self._ranks), image_renderer)
    return df


def get_gpu_kernels_with_user_annotations(
    self, rank: int, expand_names: bool = True, shorten_names: bool = True
) -> Optional[pd.DataFrame]:
    """Every GPU kernel of ``rank`` (HTA's frame rows of categories kernel, gpu_memcpy,
    gpu_memset, ...) with ``user_annotation``: the symbol id of the innermost GPU user
    annotation of the same pid and tid overlapping it (-1: none). With ``expand_names``,
    ``s_name``, ``s_cat`` and ``s_user_annotation`` hold the strings (shortened with
    ``shorten_names``, as HTA's shorten_name). None when the rank has no GPU user annotation."""
    t = self.t
    df = t.get_trace(rank)
    sym = t.symbol_table
    anno_id = sym.sym_index.get("gpu_user_annotation")
    if anno_id is None or not (df["cat"] == anno_id).any():
        return None
    kernel_cats = [i for s, i in sym.sym_index.items()
                   if re.match(r"(kernel)|(gpu_mem.+)|(mtia_ccp_events)", s)]
    kernels = df[df["cat"].isin(kernel_cats) & df["stream"].ne(-1)].copy()
    kernels["end"] = kernels["ts"] + kernels["dur"]
    annos = df[df["cat"] == anno_id].copy()
    annos["end"] = annos["ts"] + annos["dur"]
    # HTA assigns the annotations longest first, so the innermost (shortest) one wins: per pid
    # and tid, a kernel [ts, end) takes the shortest annotation [ts, end) it overlaps.
    labels = np.full(len(kernels), -1, dtype="int64")
    best = np.full(len(kernels), np.inf)
    k_ts, k_end = kernels["ts"].to_numpy(), kernels["end"].to_numpy()
    k_pid, k_tid = kernels["pid"].to_numpy(), kernels["tid"].to_numpy()
    for (pid, tid), group in annos.groupby(["pid", "tid"]):
        on = np.flatnonzero((k_pid == pid) & (k_tid == tid))
        if on.size == 0:
            continue
        order = np.argsort(k_ts[on], kind="stable")
        on = on[order]
        starts = k_ts[on]
        for a_ts, a_end, a_dur, a_name in zip(group["ts"], group["end"], group["dur"],
                                              group["name"]):
            # Kernels overlapping [a_ts, a_end): ts < a_end and end > a_ts (both closed="left"
            # intervals; a zero-length one overlaps nothing but itself).
            hi = np.searchsorted(starts, a_end, side="left")
            cand = on[:hi]
            hit = cand[(k_end[cand] > a_ts) & (a_dur <= best[cand])]
            labels[hit] = a_name
            best[hit] = a_dur
    kernels["user_annotation"] = labels
    kernels = kernels.reset_index(drop=True)
    if expand_names:
        table = list(sym.sym_table)
        if shorten_names:
            table = [_C.shorten_name(s) for s in table]
        arr = np.asarray(table + [""], dtype=object)
        kernels["s_name"] = arr[kernels["name"].to_numpy()]
        kernels["s_cat"] = arr[kernels["cat"].to_numpy()]
        kernels["s_user_annotation"] = arr[kernels["user_annotation"].to_numpy()]
    return kernels


def get_aten_op_kernels_and_delay(
    self, ranks: Optional[List[int]] = None, sort_by: Optional[List[str]] = None
) -> Dict[int, pd.DataFrame]:
    """{rank: DataFrame} (``ranks`` defaults to [0]): per ATen operator and the kernel sequence
    its instances launched (" -> " between kernel names, in launch order: HTA takes the order of
    the trace file, which can run backwards in time), occurrence_count and the mean delays
    of the first launch (us, 3 decimals): avg_aten_op_launch_delay from the operator's start to
    the launch call's, avg_runtime_delay from the call's start to the kernel's. Sorted
    descending by ``sort_by`` (default ["occurrence_count"]). Like HTA, it shows the table as a
    plotly figure."""
    ranks = list(ranks) if ranks else [0]
    sort_by = list(sort_by) if sort_by else ["occurrence_count"]
    table = self._report("aten-launch", {}, ranks)["aten_launch"]
    out = {}
    for rank in ranks:
        df = table[table["rank"] == rank].drop(columns="rank")
        df = df.sort_values(sort_by, ascending=False, kind="mergesort")
        out[rank] = df
        draw_aten_table(rank, df)
    return out


def get_cupti_counter_data_with_operators(self, ranks: Optional[List[int]] = None
                                          ) -> List[pd.DataFrame]:
    """One DataFrame per rank of ``ranks`` (default [0]) that has CUPTI range-profiler events
    ("cuda_profiler_range", one per kernel, its counters in args): the kernel's ts, dur, name,
    cat, pid, tid, op_stack (the list of CPU operators enclosing its launch, outermost first),
    top_level_op, bottom_level_op and a column per counter. [] when the traces hold no such
    event, as in HTA."""
    ranks = list(ranks) if ranks else [0]
    if not self._traces:
        return []  # HTA: no cuda_profiler_range event in its (empty) symbol table
    table = self._report("cupti-counters", {}, ranks)["cupti_counters"]
    out = []
    for rank in ranks:
        df = table[table["rank"] == rank].drop(columns="rank").reset_index(drop=True)
        if df.empty:
            continue
        df["op_stack"] = [s.split(" | ") if s else [] for s in df["op_stack"]]
        out.append(df)
    return out


def get_profiler_steps(self) -> List[int]:
    """The ProfilerStep#N numbers of the traces, sorted (without the last one when HTA leaves
    it out: include_last_profiler_step=False and two or more steps)."""
    steps = set()
    for trace in (self._traces if self._client is None else []):
        steps.update(trace.profiler_step_names())
    if self._client is not None:
        from .analysis import _step_names

        for names in self._client.gather([self._client.submit(_step_names, t)
                                          for t in self._traces]):
            steps.update(names)
    numbers = sorted({int(m.group(1)) for s in steps
                      if (m := re.match(r"ProfilerStep\s*#\s*(\d+)", s))})
    if self._drop_last_step and numbers:
        numbers = numbers[:-1]
    return numbers


def find_stragglers_with_late_start_comm_kernels(
    df: pd.DataFrame, symbol_table: SymbolTable, n_stragglers: int = 2, visualize: bool = False
) -> pd.Series:
    """HTA's default straggler rule (hta/analyzers/straggler.py) over the rows of the chosen
    iterations of every rank: the NCCL kernels longer than 1 % of the mean iteration, the last
    of each (rank, stream, iteration, kernel); the (stream, kernel) whose duration varies most
    across ranks; per iteration, the ranks whose such kernel starts latest (the top
    n_stragglers) are counted. Returns {rank: times found} as a Series."""
    comm_ids = [i for s, i in symbol_table.sym_index.items() if s.startswith("ncclKernel")]
    iterations = sorted(df["iteration"].unique())
    df = df.loc[df["iteration"].isin(iterations)]
    t_min = df["ts"].min()
    mean_iter_time = ((df["ts"] + df["dur"]).max() - t_min) / float(len(iterations))
    long_comm = df.loc[(df["stream"] > 0) & (df["iteration"] > 0)
                       & (df["dur"] >= mean_iter_time * 0.01) & (df["name"].isin(comm_ids))]
    last = long_comm.groupby(["rank", "stream", "iteration", "name"], as_index=False).last()
    last["normalized_start_time"] = (last["ts"] - t_min) / mean_iter_time
    last["duration"] = last["dur"] / mean_iter_time
    spread = last.groupby(["stream", "iteration", "name"])["duration"].std()
    stream, name = spread.groupby(["stream", "name"]).mean().idxmax()
    metric = last.loc[last["stream"].eq(stream) & last["name"].eq(name)]
    n = max(1, n_stragglers)
    if metric["iteration"].nunique() <= 1:
        threshold = sorted(metric["normalized_start_time"], reverse=True)[n - 1]
        flags = (metric["normalized_start_time"] >= threshold).astype(int)
        result = pd.Series(flags.to_numpy(), index=metric["rank"].to_numpy())
    else:
        flags = pd.Series(0, index=metric.index)
        for iteration, group in metric.groupby("iteration"):
            if iteration < 0:
                continue
            threshold = sorted(group["normalized_start_time"], reverse=True)[n - 1]
            flags[group.index] = (group["normalized_start_time"] >= threshold).astype(int)
        result = flags.groupby(metric["rank"]).sum()
    if visualize:
        px, _, _ = _plotly()
        shown = metric.assign(is_straggler=np.where(flags.to_numpy() > 0, "Yes", "No"))
        with_iteration = metric["iteration"].nunique() > 1
        fig = px.bar(shown, x="rank", y="normalized_start_time",
                     facet_col="iteration" if with_iteration else None, color="is_straggler",
                     color_discrete_map={"Yes": "red", "No": "blue"},
                     title="Potential Stragglers")
        _show(fig)
    return result


def get_potential_stragglers(
    self,
    profiler_steps: Optional[List[int]] = None,
    num_candidates: int = 2,
    visualize: bool = False,
    straggler_identification_impl: Optional[Callable[..., pd.Series]] = None,
) -> List[int]:
    """The ranks most often late to start the job's dominant communication kernel (HTA's
    rule, find_stragglers_with_late_start_comm_kernels), over ``profiler_steps`` (default: all
    of get_profiler_steps()), the top ``num_candidates``. ``straggler_identification_impl``
    is called as HTA calls it: (rows of every rank with a rank column, symbol table,
    num_candidates, visualize) -> Series {rank: score}."""
    impl = straggler_identification_impl or find_stragglers_with_late_start_comm_kernels
    num_candidates = max(1, num_candidates)
    available = self.get_profiler_steps()
    steps = available if profiler_steps is None else [s for s in profiler_steps if s in available]
    if not steps:
        raise ValueError(f"invalid value for argument: profiler_steps={profiler_steps}; "
                         f"available profiler steps={available}")
    t = self.t
    ranks = list(t.get_all_traces())
    df = pd.concat([t.get_trace(r) for r in ranks], axis=0, keys=ranks,
                   names=["rank", "idx"]).reset_index()
    counts = impl(df.loc[df["iteration"].isin(steps)], t.symbol_table, num_candidates, visualize)
    return counts.sort_values(ascending=False)[:num_candidates].index.tolist()


def idle_interval_stats(intervals: pd.DataFrame, ranks: List[int],
                        streams: Optional[List[int]]) -> pd.DataFrame:
    """HTA's second table of get_idle_time_breakdown from the idle report's "idle_intervals"
    (one row per rank, stream and category with describe()'s numbers): indexed by the idle
    category, columns rank, stream, count, mean, std, min, 25%, 50%, 75%, max, rounded to 2
    decimals, ranks in the order asked."""
    frames = []
    for rank in ranks:
        one = intervals[intervals["rank"] == rank]
        if streams:
            one = one[one["stream"].isin(list(streams))]
        frames.append(one)
    df = pd.concat(frames).set_index("idle_category")
    df = df[["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]]
    df = df.astype({"count": "float64"})
    return df.round(2)


def get_queue_length_summary_from_time_series(
    self, queue_length_dict: Dict[int, pd.DataFrame]
) -> Optional[pd.DataFrame]:
    """HTA's describe() of the queue lengths per (rank, stream) of ``queue_length_dict`` (the
    output of get_queue_length_time_series); None when it is empty. Each frame gets a rank
    column, as HTA adds one to the frames it is given."""
    results = []
    for rank, df in queue_length_dict.items():
        df["rank"] = rank
        results.append(df[["rank", "stream", "queue_length"]].groupby(["rank", "stream"])
                       .describe())
    return pd.concat(results) if results else None


# --- LabeledTrace and TraceDiff -------------------------------------------------------------


class DeviceType(Enum):
    """HTA's hta.trace_diff.DeviceType: which events TraceDiff compares (HTA's own enum, or the
    strings "CPU", "GPU", "ALL", are taken as well)."""

    CPU = 1
    GPU = 2
    ALL = 3


class LabeledTrace:
    """HTA's ``hta.trace_diff.LabeledTrace``: a job's traces with a label (the column prefix of
    TraceDiff.compare_traces). ``t``: an opscope TraceAnalysis (or its ``.t``), or else the
    traces of ``trace_dir`` are read; the label defaults to "t<0-10>" as HTA's."""

    def __init__(self, label: Optional[str] = None, t: Any = None,
                 trace_dir: Optional[str] = None) -> None:
        from .analysis import TraceAnalysis

        self.label: str = label if label else f"t{random.randint(0, 10)}"
        if t is not None:
            analysis = t if isinstance(t, TraceAnalysis) else getattr(t, "_analysis", None)
            if analysis is None:
                files = getattr(t, "trace_files", None)
                if not files:
                    raise ValueError(f"LabeledTrace: t must be a TraceAnalysis or a Trace with "
                                     f"trace_files, got {type(t).__name__}")
                analysis = TraceAnalysis(trace_files=dict(files),
                                         include_last_profiler_step=True)
        elif trace_dir is not None and os.path.isdir(trace_dir):
            # LabeledTrace only parses: every step kept, as in HTA.
            analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
        else:
            raise ValueError("either a trace object or a valid trace dir must be provided in "
                             f"LabeledTrace.__init__() (trace_dir={trace_dir!r})")
        self._analysis = analysis
        self.t = analysis.t
        self.s_map = pd.Series(self.t.symbol_table.get_sym_id_map(), dtype="int64")
        self.s_tab = pd.Series(self.t.symbol_table.get_sym_table(), dtype=object)
        self.iteration_df = self._extract_iterations()

    def _extract_iterations(self) -> pd.DataFrame:
        s_map = self.s_map
        df = s_map[s_map.index.str.startswith("ProfilerStep")].reset_index()
        df.columns = ["symbol", "id"]
        df["iteration"] = df["symbol"].apply(lambda s: int(s.replace("ProfilerStep#", "")))
        return df

    def ranks(self) -> List[int]:
        return sorted(self.t.traces.keys())

    def iterations(self) -> List[int]:
        return sorted(self.iteration_df["iteration"].values.tolist())

    @staticmethod
    def _choice(value, available, what, label):
        if value is None:
            if not available:
                raise ValueError(f"Trace {label} doesn't have any {what}.")
            return available[:1]
        chosen = [value] if isinstance(value, int) else list(value)
        for v in chosen:
            if v not in available:
                raise ValueError(f"Invalid argument {what}={value}; available: {available}")
        return chosen

    def extract_ops(self, rank: Optional[Union[int, List[int]]] = None,
                    iteration: Optional[Union[int, List[int]]] = None,
                    device_type: Any = "ALL") -> pd.DataFrame:
        """The frame rows of `rank` (default: the first) in `iteration` (default: the first),
        of the CPU (stream -1), the GPU or both."""
        ranks = self._choice(rank, self.ranks(), "rank", self.label)
        iterations = self._choice(iteration, self.iterations(), "iteration", self.label)
        if len(ranks) == 1:
            df = self.t.get_trace(ranks[0])
        else:
            df = pd.concat([self.t.get_trace(r) for r in ranks], axis=0, keys=ranks,
                           names=["rank", "idx"]).reset_index()
        df = df[df["iteration"].isin(iterations)]
        device = str(getattr(device_type, "name", device_type)).upper()
        if device == "CPU":
            return df[df["stream"].eq(-1)]
        if device == "GPU":
            return df[df["stream"].ne(-1)]
        return df

    def get_ops_summary(self, ops: pd.DataFrame) -> pd.DataFrame:
        """Per category and name of `ops`: counts and total_duration, with the strings (cat,
        name, short_name) and the ids (cat_id, name_id), as HTA's."""
        df = ops[["cat", "name", "dur"]].groupby(["cat", "name"]).aggregate(["count", "sum"])
        df.columns = ["counts", "total_duration"]
        df = df.reset_index().rename(columns={"name": "name_id", "cat": "cat_id"})
        table = self.s_tab
        df["cat"] = table[df["cat_id"]].to_numpy()
        df["name"] = table[df["name_id"]].to_numpy()
        df["short_name"] = [_C.shorten_name(n) for n in df["name"]]
        return df[["cat", "name", "short_name", "counts", "total_duration", "cat_id", "name_id"]]


def diff_side(side: Any, default_label: str) -> Tuple[List[Any], str]:
    """(traces, label) of one side of a TraceDiff: a TraceAnalysis, opscope's or HTA's
    LabeledTrace (an object with .label and .t, whose trace_files are read), HTA's Trace (its
    trace_files), a trace directory or file."""
    from .analysis import TraceAnalysis, TraceDiff, hta_times

    label = default_label
    inner = side
    if hasattr(side, "label") and hasattr(side, "t"):
        label = str(side.label)
        inner = getattr(side, "_analysis", None) or side.t
    if isinstance(inner, TraceAnalysis):
        return TraceDiff._traces(inner), label
    files = getattr(inner, "trace_files", None)
    if isinstance(files, dict) and files:
        times = getattr(inner, "times", None) or hta_times()
        return [_C.TraceFile(files[r], times=times) for r in sorted(files)], label
    if isinstance(inner, (str, bytes, os.PathLike)):
        return TraceDiff._traces(inner), label
    raise ValueError(f"Invalid argument type for ({side!r}): expected a LabeledTrace, a Trace, "
                     "a TraceAnalysis or a trace directory")


def visualize_counts_diff(cls, df: pd.DataFrame, show_image: bool = True,
                          export_image_path: Optional[str] = None) -> None:
    """Grouped bars per operator of the output of compare_traces: each side's counts and the
    difference (HTA's figure)."""
    _diff_bars(df, "counts", "Ops Count Comparison", show_image, export_image_path)


def visualize_duration_diff(cls, df: pd.DataFrame, show_image: bool = True,
                            export_image_path: Optional[str] = None) -> None:
    """Grouped bars per operator of the output of compare_traces: each side's total duration
    and the difference (HTA's figure)."""
    _diff_bars(df, "duration", "Ops Duration Comparison", show_image, export_image_path)


def install(analysis_cls: type, diff_cls: type) -> None:
    """Adds this module's methods to opscope.analysis's classes."""
    for f in (get_gpu_user_annotation_breakdown, get_gpu_kernels_with_user_annotations,
              get_aten_op_kernels_and_delay, get_cupti_counter_data_with_operators,
              get_profiler_steps, get_potential_stragglers,
              get_queue_length_summary_from_time_series):
        f.__qualname__ = f"{analysis_cls.__name__}.{f.__name__}"
        setattr(analysis_cls, f.__name__, f)
    analysis_cls.t = property(_trace_view, doc=TraceView.__doc__)
    for f in (visualize_counts_diff, visualize_duration_diff):
        f.__qualname__ = f"{diff_cls.__name__}.{f.__name__}"
        setattr(diff_cls, f.__name__, classmethod(f))
