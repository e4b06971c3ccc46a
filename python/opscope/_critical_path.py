"""HTA's critical path analysis (hta/analyzers/critical_path_analysis.py) on opscope's engine.

The graph is built and its longest path found in C++ (src/analysis/critical_path.cpp, one call,
``_C.critical_path``); this module turns the engine's arrays into HTA's objects: ``CPGraph`` (a
``networkx.DiGraph`` with HTA's attributes and methods), ``CPNode``, ``CPEdge``, ``CPEdgeType``,
``BoundType``, ``CriticalPathAnalysis`` and ``restore_cpgraph``.

Differences from HTA, each because opscope's model is not HTA's DataFrame:

* An event id (``CPNode.ev_idx``, ``edge_to_event_map`` values) is the event's index in opscope's
  result, not its row in HTA's DataFrame (its position in the trace file).
* ``CPGraph.trace_df`` holds only the events the graph names (index, name, s_name, cat, pid, tid,
  stream), with ``cat`` as text.
* Times and weights are microseconds: whole numbers (``int``) when every time of the trace is a
  whole microsecond, else ``float``.
"""

import contextlib
import gc
import logging
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import networkx as nx
import pandas as pd

from . import _C

__all__ = [
    "BoundType",
    "CPEdge",
    "CPEdgeType",
    "CPGraph",
    "CPNode",
    "CriticalPathAnalysis",
    "restore_cpgraph",
]

logger = logging.getLogger("opscope.analysis")

# The environment options HTA reads (hta/configs/env_options.py): "1" turns each on.
_ADD_ZERO_WEIGHT_LAUNCH_EDGE_ENV = "CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"
_SHOW_ZERO_WEIGHT_LAUNCH_EDGE_ENV = "CRITICAL_PATH_SHOW_ZERO_WEIGHT_LAUNCH_EDGE"
_STRICT_NEGATIVE_WEIGHT_ENV = "CRITICAL_PATH_STRICT_NEGATIVE_WEIGHT_CHECKS"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0") == "1"


@dataclass
class CPNode:
    """A point in time of the critical path graph: the start or end of an operator or kernel."""

    idx: int = -1  # the node id: its position in CPGraph.node_list
    ev_idx: int = -1  # the event (index into opscope's result)
    ts: int = 0
    is_start: bool = False
    is_blocking: bool = False

    def __repr__(self) -> str:
        return (
            f"CPNode(event: {self.ev_idx}, node_id={self.idx}, "
            f"ts={self.ts}, is_start={self.is_start}, "
            f"is_blocking={self.is_blocking})"
        )


class CPEdgeType(Enum):
    OPERATOR_KERNEL = "critical_path_operator"
    DEPENDENCY = "critical_path_dependency"
    KERNEL_LAUNCH_DELAY = "critical_path_kernel_launch_delay"
    KERNEL_KERNEL_DELAY = "critical_path_kernel_kernel_delay"
    SYNC_DEPENDENCY = "critical_path_sync_dependency"


# The engine's CriticalPathEdgeType numbers, in HTA's order.
_EDGE_TYPES = list(CPEdgeType)


class BoundType(Enum):
    GPU_KERNEL_KERNEL_OVERHEAD = "gpu_kernel_kernel_overhead"
    GPU_KERNEL_LAUNCH_OVERHEAD = "gpu_kernel_launch_overhead"
    DATA_LOADING = "data_loading"
    CPU_BOUND = "cpu_bound"
    GPU_COMPUTE_BOUND = "gpu_compute_bound"
    GPU_COMMUNICATION_BOUND = "gpu_communication_bound"


DEFAULT_EDGE_TYPES_IN_VIZ: Set[CPEdgeType] = {
    CPEdgeType.DEPENDENCY,
    CPEdgeType.KERNEL_LAUNCH_DELAY,
    CPEdgeType.SYNC_DEPENDENCY,
}


@dataclass(frozen=True)
class CPEdge:
    """An edge of the critical path graph: a span, a dependency, a delay or a sync."""

    begin: int
    end: int
    type: CPEdgeType
    weight: int = 0


@dataclass(frozen=True)
class _CPGraphData:
    """What save() pickles besides the graph and the events table (HTA's layout)."""

    node_list: List[CPNode]
    critical_path_nodes: List[int]
    critical_path_events_set: Set[int]
    critical_path_edges_set: Set[CPEdge]
    event_to_start_node_map: Dict[int, int]
    event_to_end_node_map: Dict[int, int]
    edge_to_event_map: Dict[Tuple[int, int], int]


# HTA's CommunicateKernelGroupingPattern (hta/common/types.py), for bound_by.
_COMM_KERNEL = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")

_TRACE_DF_COLUMNS = ["index", "name", "s_name", "cat", "pid", "tid", "stream"]


@contextlib.contextmanager
def _no_gc():
    """Python's cyclic collector off while tens of thousands of objects that all stay
    reachable are made: in a process with a large heap (HTA's frames, the caller's data) its
    full passes, triggered by the allocations alone, cost more than making the objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CPGraph(nx.DiGraph):
    """HTA's critical path graph of one rank, a ``networkx.DiGraph`` whose nodes are node ids
    (positions in ``node_list``) and whose edges carry ``weight`` and ``object`` (a CPEdge).

    Built by ``TraceAnalysis.critical_path_analysis``; ``CPGraph(None, t_full, rank, G)``
    wraps a restored networkx graph as HTA's restore_cpgraph does.
    """

    def __init__(
        self,
        t: Any = None,
        t_full: Any = None,
        rank: int = 0,
        G: Any = None,
        data_load_events: Optional[List[str]] = None,
    ) -> None:
        super().__init__(G)
        self.rank: int = rank
        self.t = t
        self.t_full = t_full
        self.data_load_events = data_load_events
        self.trace_df: pd.DataFrame = pd.DataFrame(columns=_TRACE_DF_COLUMNS)
        self.critical_path_nodes: List[int] = []
        self.critical_path_events_set: Set[int] = set()
        self.critical_path_edges_set: Set[CPEdge] = set()
        self.node_list: List[CPNode] = []
        self.event_to_start_node_map: Dict[int, int] = {}
        self.event_to_end_node_map: Dict[int, int] = {}
        self.edge_to_event_map: Dict[Tuple[int, int], int] = {}
        self._stream_of_event: Optional[Dict[int, int]] = None

    # --- Built from the engine, lazily ---------------------------------------------------
    # The engine answers with arrays (_C.critical_path). The Python objects HTA's graph is made
    # of (a CPNode per node, a CPEdge and two networkx dict entries per edge) cost far more to
    # make than the whole analysis in C++, so each part is made when first read: the networkx
    # graph's own dicts (_node, _adj, _pred, _succ: through properties, since networkx reads
    # them directly), and HTA's attributes (through __getattr__, which runs only while the
    # attribute is missing). What needs only the path (summary, breakdown, the overlay by
    # default) never makes the rest.

    def _graph_dict(key: str, views: Tuple[str, ...]):  # type: ignore[misc]
        def get(self):
            if self.__dict__.get("_cp_pending") is not None:
                self._materialize_graph()
            return self.__dict__[key]

        def set_(self, value):
            # As networkx's own descriptors: a new dict drops the cached views of the old one.
            self.__dict__[key] = value
            for view in views:
                self.__dict__.pop(view, None)

        return property(get, set_)

    _node = _graph_dict("_cp_node", ())
    _adj = _graph_dict("_cp_adj", ("adj", "succ"))
    _succ = _adj  # one dict, as in networkx
    _pred = _graph_dict("_cp_pred", ("pred",))
    del _graph_dict

    _LAZY = (
        "node_list",
        "event_to_start_node_map",
        "event_to_end_node_map",
        "edge_to_event_map",
        "critical_path_events_set",
        "critical_path_edges_set",
    )

    @classmethod
    def _from_engine(
        cls, g: Dict[str, Any], t: Any, rank: int, data_load_events: Optional[List[str]]
    ) -> "CPGraph":
        self = cls(None, t, rank, data_load_events=data_load_events)
        self.t = t
        for name in cls._LAZY:
            del self.__dict__[name]
        ts_ns, w_ns, gw_ns = g["node_ts_ns"], g["edge_weight_ns"], g["edge_graph_weight_ns"]
        # Microseconds, whole when every time is (HTA's rounded traces), else fractional.
        whole = not (ts_ns % 1000).any() and not (w_ns % 1000).any() and not (gw_ns % 1000).any()
        self._cp_engine = dict(g, whole=whole)
        self.critical_path_nodes = g["path_nodes"].tolist()
        events = g["events"]
        self.trace_df = pd.DataFrame({c: events[c] for c in _TRACE_DF_COLUMNS})
        self.trace_df.index = self.trace_df["index"].to_numpy()
        self.__dict__["_cp_pending"] = True
        return self

    def _us(self, ns: Any) -> List[Any]:
        return (ns // 1000).tolist() if self._cp_engine["whole"] else (ns / 1000).tolist()

    def _edge_objects(self, which: Any = None) -> List[CPEdge]:
        g = self._cp_engine
        sel = (lambda a: a) if which is None else (lambda a: a[which])
        types = [_EDGE_TYPES[k] for k in sel(g["edge_type"]).tolist()]
        return list(
            map(
                CPEdge,
                sel(g["edge_begin"]).tolist(),
                sel(g["edge_end"]).tolist(),
                types,
                self._us(sel(g["edge_weight_ns"])),
            )
        )

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not made yet (see above); anything else is missing.
        engine = self.__dict__.get("_cp_engine")
        if engine is None or name not in CPGraph._LAZY:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        with _no_gc():
            return self._make(name, engine)

    def _make(self, name: str, g: Dict[str, Any]) -> Any:
        if name == "node_list":
            value = list(
                map(
                    CPNode,
                    range(len(g["node_event"])),
                    g["node_event"].tolist(),
                    self._us(g["node_ts_ns"]),
                    g["node_is_start"].tolist(),
                    g["node_is_blocking"].tolist(),
                )
            )
        elif name in ("event_to_start_node_map", "event_to_end_node_map"):
            want = name == "event_to_start_node_map"
            starts = g["node_is_start"]
            idx = (starts if want else ~starts).nonzero()[0]
            value = dict(zip(g["node_event"][idx].tolist(), idx.tolist()))
        elif name == "edge_to_event_map":
            attributed = (g["edge_event"] != g["no_event"]).nonzero()[0]
            value = dict(
                zip(
                    zip(g["edge_begin"][attributed].tolist(), g["edge_end"][attributed].tolist()),
                    g["edge_event"][attributed].tolist(),
                )
            )
        elif name == "critical_path_events_set":
            value = set(g["node_event"][g["path_nodes"]].tolist())
        else:  # critical_path_edges_set
            value = set(self._edge_objects(g["path_edges"]))
        self.__dict__[name] = value
        return value

    def _materialize_graph(self) -> None:
        """Fills networkx's dicts as add_edges_from would (nodes in the order the edges bring
        them in, each edge's data {"weight", "object"}), in one pass."""
        with _no_gc():
            self._fill_graph_dicts()

    def _fill_graph_dicts(self) -> None:
        d = self.__dict__
        d["_cp_pending"] = None
        g = self._cp_engine
        objects = self._edge_objects()
        node, succ, pred = d["_cp_node"], d["_cp_adj"], d["_cp_pred"]
        for n in g["graph_nodes"].tolist():
            node[n] = {}
            succ[n] = {}
            pred[n] = {}
        for u, v, w, o in zip(
            g["edge_begin"].tolist(), g["edge_end"].tolist(), self._us(g["edge_graph_weight_ns"]),
            objects,
        ):
            data = {"weight": w, "object": o}
            succ[u][v] = data
            pred[v][u] = data

    # --- HTA's tables of CUDA event synchronization --------------------------------------

    def _get_cuda_event_record_df(self) -> Optional[pd.DataFrame]:
        """The cudaEventRecord calls a synchronization waits on: pid, tid, ts, name,
        correlation, stream and gpu they were recorded on, index_previous_launch (the last
        launch onto them before, -1 for none) and correlation_launch_event (HTA's columns)."""
        table = self.__dict__.get("_cp_engine", {}).get("event_records")
        if table is None or len(table["index"]) == 0:
            return None
        df = pd.DataFrame({k: v for k, v in table.items() if k != "index"})
        return df[["pid", "tid", "ts", "name", "correlation", "stream", "gpu",
                   "correlation_launch_event", "index_previous_launch"]]

    def _get_cuda_stream_wait_event_df(self) -> Optional[pd.DataFrame]:
        """The cudaStreamWaitEvent calls, indexed by event: name, ts, pid, tid, correlation,
        stream (the one that waits) and index_next_launch (the next launch onto it from the
        same thread, -1 for none)."""
        table = self.__dict__.get("_cp_engine", {}).get("stream_waits")
        if table is None or len(table["index"]) == 0:
            return None
        df = pd.DataFrame(dict(table)).set_index("index")
        return df[["name", "ts", "pid", "tid", "correlation", "stream", "index_next_launch"]]

    # --- HTA's lookups --------------------------------------------------------------------

    @cached_property
    def _event_to_attributed_edges_map(self) -> Dict[int, List[CPEdge]]:
        d: Dict[int, List[CPEdge]] = defaultdict(list)
        for (u, v), ev_idx in self.edge_to_event_map.items():
            d[ev_idx].append(self.edges[u, v]["object"])
        return d

    def _get_node_name(self, ev_id: int) -> str:
        if ev_id < 0:
            return "ROOT"
        return str(self.trace_df.name.loc[ev_id])

    def get_nodes_for_event(self, ev_id: int) -> Tuple[Optional[CPNode], Optional[CPNode]]:
        """The start and end CPNode of an event (None where it has none)."""
        start_node = self.event_to_start_node_map.get(ev_id, -1)
        end_node = self.event_to_end_node_map.get(ev_id, -1)
        return (
            self.node_list[start_node] if start_node >= 0 else None,
            self.node_list[end_node] if end_node >= 0 else None,
        )

    def get_events_for_edge(self, edge: CPEdge) -> Tuple[int, int]:
        """The events of an edge's source and destination nodes."""
        return int(self.node_list[edge.begin].ev_idx), int(self.node_list[edge.end].ev_idx)

    def get_event_attribution_for_edge(self, edge: CPEdge) -> Optional[int]:
        """The event an edge is attributed to (spans and kernel gaps only), else None."""
        return self.edge_to_event_map.get((edge.begin, edge.end), None)

    def get_edges_attributed_to_event(self, ev_idx: int) -> List[CPEdge]:
        """The edges attributed to an event."""
        return self._event_to_attributed_edges_map.get(ev_idx, [])

    # --- HTA's graph edits (used by simulations and HTA's own tests) ----------------------

    def _add_edge(self, edge: CPEdge) -> None:
        self.add_edge(edge.begin, edge.end, weight=edge.weight, object=edge)

    def _add_edge_helper(
        self, src: CPNode, dest: CPNode, type: CPEdgeType, zero_weight: bool = False
    ) -> CPEdge:
        assert src.idx != dest.idx, f"Src node {src} == Dest node {dest}"
        weight = (
            0
            if (type in [CPEdgeType.DEPENDENCY, CPEdgeType.SYNC_DEPENDENCY] or zero_weight)
            else (dest.ts - src.ts)
        )
        e = CPEdge(begin=src.idx, end=dest.idx, type=type, weight=weight)
        self._add_edge(e)
        return e

    def _attribute_edge(self, e: CPEdge, src_parent: Optional[int]) -> None:
        """HTA's rule: a span or kernel gap belongs to the source's event when the source is a
        start (or for gaps), to the destination's when both are ends, else to src_parent."""
        if e.type not in {CPEdgeType.OPERATOR_KERNEL, CPEdgeType.KERNEL_KERNEL_DELAY}:
            return
        src, dest = self.node_list[e.begin], self.node_list[e.end]
        if e.type == CPEdgeType.KERNEL_KERNEL_DELAY:
            ev_idx = src.ev_idx
        elif src.is_start:
            ev_idx = src.ev_idx
        elif not dest.is_start:
            ev_idx = dest.ev_idx
        else:
            ev_idx = src_parent
        assert ev_idx is not None, "ev_idx must not be None for edge attribution"
        self.edge_to_event_map[(src.idx, dest.idx)] = int(ev_idx)

    def _add_gpu_cpu_sync_edge(self, gpu_node: CPNode, runtime_eid: int) -> None:
        _, end_node = self.get_nodes_for_event(runtime_eid)
        if end_node is None:
            return
        self._add_edge_helper(gpu_node, end_node, CPEdgeType.SYNC_DEPENDENCY)

    def _add_kernel_launch_delay_edge(
        self, runtime_index: int, kernel_start_node: CPNode, zero_weight: bool = False
    ) -> bool:
        runtime_start, _ = self.get_nodes_for_event(runtime_index)
        if runtime_start is None:
            return False
        self._add_edge_helper(
            runtime_start, kernel_start_node, CPEdgeType.KERNEL_LAUNCH_DELAY, zero_weight
        )
        return True

    # --- The longest path -----------------------------------------------------------------

    def _stream(self, ev_idx: int) -> int:
        if self._stream_of_event is None:
            self._stream_of_event = dict(zip(self.trace_df["index"], self.trace_df["stream"]))
        return int(self._stream_of_event.get(ev_idx, -1))

    def _validate_graph(self) -> bool:
        """HTA's checks: negative weights (-1 us or less taken as 0 unless
        CRITICAL_PATH_STRICT_NEGATIVE_WEIGHT_CHECKS=1), syncs within one stream, cycles."""
        strict = _env_flag(_STRICT_NEGATIVE_WEIGHT_ENV)
        negative = same_stream = False
        for u, v in self.edges:
            e = self.edges[u, v]["object"]
            if e.weight <= -1 and not strict:
                self.edges[u, v]["weight"] = 0
            elif e.weight < -1:
                logger.error(f"Found an edge with negative weight {e}")
                negative = True
            if e.type == CPEdgeType.SYNC_DEPENDENCY:
                s = self._stream(self.node_list[u].ev_idx)
                d = self._stream(self.node_list[v].ev_idx)
                if s != -1 and s == d:
                    logger.error(f"Seeing a CUDA sync between kernels on same stream {e}")
                    same_stream = True
        if negative or same_stream:
            return False
        return nx.is_directed_acyclic_graph(self)

    def critical_path(self) -> bool:
        """Finds the longest path again (networkx's dag_longest_path, as HTA), after edits or a
        restore. Returns whether it succeeded."""
        if not self._validate_graph():
            logger.error("Graph is not valid, see prints above for help on debugging")
            return False
        try:
            self.critical_path_nodes = nx.dag_longest_path(self, weight="weight")
        except nx.NetworkXUnfeasible as err:
            logger.error(f"Critical path algorithm failed due to {err}")
            return False
        assert len(self.critical_path_nodes) >= 2
        self.critical_path_events_set = {
            self.node_list[nid].ev_idx for nid in self.critical_path_nodes
        }
        path = self.critical_path_nodes
        self.critical_path_edges_set = {
            self.edges[u, v]["object"] for u, v in zip(path, path[1:])
        }
        return True

    # --- Breakdown and summary ------------------------------------------------------------

    def bound_by(self, row: Dict[str, Any]) -> str:
        """HTA's BoundType of one edge of the path."""
        if row["type"] == CPEdgeType.KERNEL_KERNEL_DELAY.value:
            return BoundType.GPU_KERNEL_KERNEL_OVERHEAD.value
        if row["type"] == CPEdgeType.KERNEL_LAUNCH_DELAY.value:
            return BoundType.GPU_KERNEL_LAUNCH_OVERHEAD.value
        if row["type"] in [CPEdgeType.DEPENDENCY.value, CPEdgeType.SYNC_DEPENDENCY.value]:
            return ""
        assert not pd.isna(row["s_name"]), f"name of edge is na : row = {row}"
        if row["stream"] < 0:
            if self.data_load_events and any(
                re.search(pattern, row["s_name"]) for pattern in self.data_load_events
            ):
                return BoundType.DATA_LOADING.value
            return BoundType.CPU_BOUND.value
        if _COMM_KERNEL.match(row["s_name"]):
            return BoundType.GPU_COMMUNICATION_BOUND.value
        return BoundType.GPU_COMPUTE_BOUND.value

    def get_critical_path_breakdown(self) -> Optional[pd.DataFrame]:
        """One row per edge of the path: event_idx, duration, type, s_name, cat, pid, tid,
        stream, index, bound_by (HTA's columns)."""
        if len(self.critical_path_nodes) == 0:
            return None
        edge_df = pd.DataFrame.from_records(
            {
                "event_idx": self.get_event_attribution_for_edge(e),
                "duration": e.weight,
                "type": str(e.type.value),
            }
            for e in self.critical_path_edges_set
        )
        edge_events_df = pd.merge(
            edge_df,
            self.trace_df[["s_name", "cat", "pid", "tid", "stream", "index"]],
            left_on="event_idx",
            right_on="index",
            how="left",
        )
        edge_events_df["bound_by"] = edge_events_df.apply(self.bound_by, axis=1)
        return edge_events_df

    def summary(self) -> pd.Series:
        """The share of the path's duration (percent) by bound type."""
        edf = self.get_critical_path_breakdown()
        assert edf is not None, "Critical path breakdown is required for summary"
        summary = edf.groupby("bound_by").duration.sum() / edf.duration.sum() * 100
        print("Critical Path broken down by boundedness = (in % of duration)")
        return summary

    def show_critical_path(self) -> None:
        for n in self.critical_path_nodes:
            node = self.node_list[n]
            logger.info(f"Critical {node}, ev_id = {node.ev_idx} ev_name = {self._get_node_name(node.ev_idx)}")

    # --- Save and restore (HTA's zip layout) ----------------------------------------------

    def save(self, out_dir: str) -> str:
        """Saves the graph to ``<out_dir>.zip`` (trace_data.csv, cp_graph.pkl, cp_data.pkl, as
        HTA does) and returns that path."""
        import pickle
        from zipfile import ZipFile

        data = _CPGraphData(
            node_list=self.node_list,
            critical_path_nodes=self.critical_path_nodes,
            critical_path_events_set=self.critical_path_events_set,
            critical_path_edges_set=self.critical_path_edges_set,
            event_to_start_node_map=self.event_to_start_node_map,
            event_to_end_node_map=self.event_to_end_node_map,
            edge_to_event_map=self.edge_to_event_map,
        )
        os.makedirs(out_dir, exist_ok=True)
        trace_csv_path = os.path.join(out_dir, "trace_data.csv")
        self.trace_df.to_csv(trace_csv_path, index=True, index_label="_index_")
        graph_pkl_path = os.path.join(out_dir, "cp_graph.pkl")
        with open(graph_pkl_path, "wb") as f:
            pickle.dump(nx.node_link_data(self), f)
        data_pkl_path = os.path.join(out_dir, "cp_data.pkl")
        with open(data_pkl_path, "wb") as f:
            pickle.dump(data, f)
        zip_filename = f"{out_dir}.zip"
        with ZipFile(zip_filename, "w") as zipf:
            zipf.write(trace_csv_path)
            zipf.write(graph_pkl_path)
            zipf.write(data_pkl_path)
        return zip_filename


def restore_cpgraph(zip_filename: str, t_full: Any, rank: int) -> CPGraph:
    """A CPGraph saved by CPGraph.save(), as HTA restores it (extracted under /tmp)."""
    import pickle
    from zipfile import ZipFile

    with ZipFile(zip_filename, "r") as zipf:
        out_dir = "/".join(zipf.namelist()[0].split("/")[:-1])
        zipf.extractall(path="/tmp/")
    out_dir = os.path.join("/tmp", out_dir)
    with open(os.path.join(out_dir, "cp_graph.pkl"), "rb") as f:
        G = nx.node_link_graph(pickle.load(f))
    restored = CPGraph(None, t_full, rank, G)
    restored.trace_df = pd.read_csv(os.path.join(out_dir, "trace_data.csv")).set_index("_index_")
    with open(os.path.join(out_dir, "cp_data.pkl"), "rb") as f:
        data = pickle.load(f)
    restored.node_list = data.node_list
    restored.critical_path_nodes = data.critical_path_nodes
    restored.critical_path_events_set = data.critical_path_events_set
    restored.critical_path_edges_set = data.critical_path_edges_set
    restored.event_to_start_node_map = data.event_to_start_node_map
    restored.event_to_end_node_map = data.event_to_end_node_map
    restored.edge_to_event_map = data.edge_to_event_map
    return restored


def _trace_file(t: Any, rank: int) -> "_C.TraceFile":
    """The rank's trace from an opscope TraceAnalysis, or from anything with HTA's
    ``trace_files`` ({rank: path}: HTA's Trace, opscope's TraceAnalysis.t), read again."""
    if hasattr(t, "_trace_file_of_rank"):
        return t._trace_file_of_rank(rank)
    files = getattr(t, "trace_files", None)
    if not isinstance(files, dict) or rank not in files:
        raise ValueError(
            f"rank {rank}: expected an opscope TraceAnalysis or a trace with trace_files "
            f"{{rank: path}}, got {type(t).__name__}"
        )
    return _C.TraceFile(files[rank])


class CriticalPathAnalysis:
    """HTA's CriticalPathAnalysis; ``t`` is an ``opscope.analysis.TraceAnalysis`` (or its
    ``t``)."""

    def __init__(self) -> None:
        self.cp_nodes: Dict[int, CPNode] = {}

    @classmethod
    def critical_path_analysis(
        cls,
        t: Any,
        rank: int,
        annotation: str,
        instance_id: Union[Optional[int], Tuple[int, int]],
        data_load_events: Optional[List[str]] = None,
    ) -> Optional[Tuple[CPGraph, bool]]:
        """The critical path of `rank` within the instances of `annotation` (a part of event
        names; "" the whole trace): instance_id None (the first), an int, or (start, end)
        inclusive. Returns (CPGraph, success), or None when no event has such a name."""
        if instance_id is None:
            start, end = 0, 0
        elif isinstance(instance_id, tuple):
            start, end = instance_id
        elif isinstance(instance_id, int):
            start, end = instance_id, instance_id
        else:
            logger.error("Unexpected input type instance_id")
            return None
        options = {
            "annotation": annotation,
            "instance_start": int(start),
            "instance_end": int(end),
            "data_load_events": list(data_load_events or []),
            "add_zero_weight_launch_edges": _env_flag(_ADD_ZERO_WEIGHT_LAUNCH_EDGE_ENV),
            # The job's decision (HTA's trace filter leaves the last step out over all ranks).
            "drop_last_step": int(getattr(t, "_drop_last_step", -1)),
        }
        g = _C.critical_path(_trace_file(t, rank), options)
        if g is None:
            logger.error(f"Could not find annotation {annotation} in the trace.")
            return None
        for w in g["warnings"]:
            logger.warning(w)
        cp_graph = CPGraph._from_engine(g, t, rank, data_load_events)
        return cp_graph, bool(g["valid"])

    @staticmethod
    def _is_zero_weight_launch_edge(e: CPEdge) -> bool:
        return e.type == CPEdgeType.KERNEL_LAUNCH_DELAY and e.weight == 0

    @classmethod
    def overlay_critical_path_analysis(
        cls,
        t: Any,
        rank: int,
        critical_path_graph: CPGraph,
        output_dir: str,
        only_show_critical_events: bool,
        show_all_edges: bool,
        edge_types_to_viz: Optional[Set[CPEdgeType]] = None,
    ) -> str:
        """Writes HTA's overlaid trace (gzip JSON, "overlaid_critical_path_<trace file name>"
        in output_dir, made when missing) and returns its path ("" when output_dir is a file)."""
        if only_show_critical_events:
            show_all_edges = False
        if edge_types_to_viz is None:
            edge_types_to_viz = DEFAULT_EDGE_TYPES_IN_VIZ
        path = Path(output_dir).expanduser()
        if not path.exists():
            os.makedirs(path)
        elif not path.is_dir():
            logger.error(f"{output_dir} is not a directory.")
            return ""
        trace = _trace_file(t, rank)
        output_file = os.path.join(
            str(path), "overlaid_critical_path_" + trace.path.split("/")[-1]
        )
        g = critical_path_graph
        if show_all_edges:
            edges = (g.edges[u, v]["object"] for u, v in g.edges)
            if not _env_flag(_SHOW_ZERO_WEIGHT_LAUNCH_EDGE_ENV):
                edges = (e for e in edges if not cls._is_zero_weight_launch_edge(e))
        else:
            edges = (e for e in g.critical_path_edges_set if e.type in edge_types_to_viz)
        nodes = g.node_list
        critical = g.critical_path_edges_set
        flows = [
            (
                nodes[e.begin].ev_idx,
                nodes[e.begin].is_start,
                nodes[e.end].ev_idx,
                nodes[e.end].is_start,
                _EDGE_TYPES.index(e.type),
                int(e.weight),
                e in critical,
            )
            for e in edges
        ]
        _C.write_critical_path_trace(
            trace,
            output_file,
            sorted(int(x) for x in g.critical_path_events_set if x >= 0),
            flows,
            only_show_critical_events,
        )
        return output_file
