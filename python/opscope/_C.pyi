# Typing stubs for opscope._C, the native module behind opscope.profiler.
# Times are float microseconds unless a name ends in _ns.
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union
import enum

__version__: str

class ProfilerActivity(enum.IntEnum):
    CPU = 0
    CUDA = 1

def supported_activities() -> List[ProfilerActivity]: ...
def activity_unavailable_reason(activity: ProfilerActivity) -> str: ...
def set_distributed_info(json: str) -> None: ...
def distributed_info() -> str: ...
def _warn(message: str) -> None: ...
def _inform(message: str) -> None: ...

class Schedule:
    def __call__(self, step: int) -> int: ...

def schedule(
    *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0
) -> Schedule: ...
def default_schedule() -> Schedule: ...

class ExperimentalConfig:
    buffer_limit_bytes: int
    record_all_threads: bool
    def __init__(self, *, buffer_limit_bytes: int = ..., record_all_threads: bool = True) -> None: ...

class ExecutionTraceObserver:
    def __init__(self) -> None: ...
    def register_callback(self, output_file_path: str) -> ExecutionTraceObserver: ...
    def unregister_callback(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def cleanup(self) -> None: ...
    def is_registered(self) -> bool: ...
    def is_running(self) -> bool: ...
    def get_output_file_path(self) -> str: ...

class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1

class FunctionEvent:
    id: int
    name: str  # "ProfilerStep*" for a step range, as in torch
    key: str
    trace_name: str  # the name as recorded ("ProfilerStep#3")
    kind: str  # "range", "async_range", "instant", "memory"
    scope: int  # RecordScope's value, as torch (7: user scope)
    scope_name: str  # "FUNCTION", "USER_SCOPE", ...
    count: int  # 1
    is_async: bool
    is_user_annotation: bool
    is_remote: bool
    is_legacy: bool
    thread: int  # OS thread id (threading.get_native_id())
    thread_name: str
    start_ns: int  # since the Unix epoch
    end_ns: int
    start_us: float  # since the window's start
    end_us: float
    time_range: Any  # opscope.profiler_util.Interval, in us since the window's start
    cpu_time: float
    cpu_time_total: float
    self_cpu_time_total: float
    cpu_time_str: str
    cpu_time_total_str: str
    self_cpu_time_total_str: str
    cuda_time: float  # 0: no GPU backend yet
    cuda_time_total: float
    self_cuda_time_total: float
    cuda_time_str: str
    cuda_time_total_str: str
    self_cuda_time_total_str: str
    cpu_memory_usage: int
    self_cpu_memory_usage: int
    cuda_memory_usage: int
    self_cuda_memory_usage: int
    sequence_nr: int
    fwd_thread: int
    cpu_parent: Optional[FunctionEvent]
    cpu_children: List[FunctionEvent]
    input_shapes: List[List[Any]]
    input_types: List[str]
    concrete_inputs: List[str]
    stack: List[str]  # innermost frame first
    module_hierarchy: str
    flops: int
    memory_bytes: int
    kernels: List[Any]
    device_type: DeviceType
    device_index: int
    node_id: int
    # torch 2.x's names for the cuda_* figures; use_device: no PrivateUse1 backend here.
    device_time: float
    device_time_total: float
    self_device_time_total: float
    device_time_str: str
    device_time_total_str: str
    self_device_time_total_str: str
    device_memory_usage: int
    self_device_memory_usage: int
    use_device: None
    device_resource_id: int  # the thread, as torch 2.x's CPU events
    kwinputs: Dict[str, Any]  # {}: no keyword inputs recorded
    self_cpu_percent: int  # -1, as torch 2.x's outside its table code
    total_cpu_percent: int
    total_device_percent: int

class FunctionEventAvg:
    key: str
    count: int
    cpu_time_total: float
    self_cpu_time_total: float
    cpu_time: float  # average per call
    cpu_time_str: str
    cpu_time_total_str: str
    self_cpu_time_total_str: str
    cuda_time: float
    cuda_time_total: float
    self_cuda_time_total: float
    cuda_time_str: str
    cuda_time_total_str: str
    self_cuda_time_total_str: str
    cpu_memory_usage: int
    self_cpu_memory_usage: int
    cuda_memory_usage: int
    self_cuda_memory_usage: int
    flops: int
    input_shapes: Union[str, List[List[Any]]]  # "" unless grouped by input shape
    stack: List[str]
    node_id: int
    is_async: bool
    is_remote: bool
    is_legacy: bool
    self_cpu_percent_total: float  # the table's Self CPU % of this key (torch 2)
    device_type: DeviceType
    # The first member event's, as torch's (None in a row no event was added to).
    scope: Optional[int]
    cpu_parent: Optional[FunctionEvent]
    cpu_children: Optional[List[FunctionEvent]]
    is_user_annotation: bool  # the first member event's (torch 2.x)
    # torch 2.x's names for the cuda_* figures; use_device: no PrivateUse1 backend here.
    device_time: float
    device_time_total: float
    self_device_time_total: float
    device_time_str: str
    device_time_total_str: str
    self_device_time_total_str: str
    device_memory_usage: int
    self_device_memory_usage: int
    use_device: None
    def add(self, other: Union[FunctionEvent, FunctionEventAvg]) -> FunctionEventAvg: ...

class KeyAverages:
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> FunctionEventAvg: ...  # no slices
    def __iter__(self) -> Iterator[FunctionEventAvg]: ...
    def table(
        self,
        sort_by: Optional[str] = None,
        row_limit: int = 100,
        max_src_column_width: int = 75,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: Optional[str] = None,
        top_level_events_only: bool = False,
        time_unit: Optional[str] = None,
    ) -> str: ...

def table_of(
    items: List[Union[FunctionEvent, FunctionEventAvg]],
    *,
    profile_memory: bool = False,
    with_flops: bool = False,
    sort_by: Optional[str] = None,
    row_limit: int = 100,
    max_src_column_width: int = 75,
    max_name_column_width: int = 55,
    max_shapes_column_width: int = 80,
    header: Optional[str] = None,
    top_level_events_only: bool = False,
    time_unit: Optional[str] = None,
) -> str: ...
def total_average_of(items: List[Union[FunctionEvent, FunctionEventAvg]]) -> FunctionEventAvg: ...
def _enable_nvtx(record_shapes: bool = False) -> None: ...
def _disable_nvtx() -> None: ...

class Result:
    metadata: List[Tuple[str, str]]
    pid: int
    start_time_ns: int
    end_time_ns: int
    threads: List[Tuple[int, str]]
    def function_events(self) -> List[FunctionEvent]: ...
    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> KeyAverages: ...
    def key_averages_of(
        self,
        indices: Optional[List[int]],
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
    ) -> List[FunctionEventAvg]: ...
    def export_chrome_trace(self, path: str) -> None: ...
    def export_trace(self, path: str, format: str = "") -> None: ...
    def chrome_trace_json(self) -> str: ...
    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None: ...
    def export_memory_timeline(self, path: str, device: str = "cpu") -> None: ...

class Profiler:
    step_num: int
    current_action: int
    is_started: bool
    def __init__(
        self,
        activities: List[ProfilerActivity],
        schedule: Union[Schedule, Callable[[int], Any], None] = None,
        on_trace_ready: Optional[Callable[[], None]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Optional[ExperimentalConfig] = None,
        execution_trace_observer: Optional[ExecutionTraceObserver] = None,
    ) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def step(self) -> None: ...
    def result(self, call: str = ...) -> Result: ...
    def has_result(self) -> bool: ...
    def add_metadata(self, key: str, value: str) -> None: ...
    def add_metadata_json(self, key: str, value: str) -> None: ...
    def preset_metadata_json(self, key: str, value: str) -> None: ...
    def stats(self) -> dict: ...

class record_function:
    """Context manager and decorator recording a USER_SCOPE range."""
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Optional[str]: ...
    def __init__(self, name: str, args: Optional[str] = None) -> None: ...
    def __enter__(self) -> record_function: ...
    def __exit__(self, *exc: Any) -> None: ...
    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]: ...

class RecordFunctionFast:
    def __init__(
        self,
        name: str,
        input_values: Optional[Union[list, tuple]] = None,
        keyword_values: Optional[dict] = None,
    ) -> None: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: Any) -> None: ...

_C_API: Any  # PyCapsule "opscope._C._C_API": python/include/opscope/python_capi.h

def _run_native_threads(threads: int, outer: str, inner: str, inner_count: int) -> List[int]: ...

class ModuleScope:
    """Context manager that enters a module for the ranges begun inside it (their module path,
    "nn.Module: <name>" frames in with_modules stacks). Also exported as opscope.module."""
    def __init__(self, name: str) -> None: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: Any) -> None: ...

class CapturedTraceback:
    """See opscope.traceback.CapturedTraceback."""
    def __len__(self) -> int: ...
    def summary(self) -> Any: ...
    def format(self) -> List[str]: ...

def capture_traceback(limit: Optional[int] = None) -> CapturedTraceback: ...

# The engine of opscope.analysis (python/src/analysis.cpp).
class TraceFile:
    """A trace (.json or .json.gz) read for analysis; pickles as its path (read again where it
    is unpickled)."""
    # times: "ns" (as written), "hta" (HTA's rounding), "hta_float" (HTA's doubles,
    # HTA_DISABLE_NS_ROUNDING=1): opscope::TraceTimes
    def __init__(self, path: str, max_gzip_ratio: float = 100,
                 max_event_size: int = 67108864, times: str = "ns") -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def times(self) -> str: ...
    @property
    def rank(self) -> int: ...  # distributedInfo.rank, -1 when the trace has none
    def profiler_step_names(self) -> List[str]: ...  # distinct ProfilerStep#N names, sorted

# (name, HTA method, summary, options, [(method, table, form, docstring, series)])
def report_kinds() -> List[Tuple[str, str, str, List[str], List[Tuple[str, str, str, str, str]]]]: ...

# options: ReportOptions fields by name (drop_last_step, first_position, duration_ratio,
# num_kernels, consecutive_kernel_delay_us, runtime_cutoff_us, launch_delay_cutoff_us,
# include_memory_events, operator_name, min_pattern_len, max_queue_length).
# Returns (table name, column names, columns): numbers as numpy arrays, text as lists.
def run_report(
    name: str, traces: List[TraceFile], options: Dict[str, Any] = ...
) -> List[Tuple[str, List[str], List[Any]]]: ...

# HTA's shorten_name: no return type, template or function arguments.
def shorten_name(name: str) -> str: ...

# HTA's TraceDiff between two lists of traces (each side's ranks); options: control_ranks,
# test_ranks, control_iterations, test_iterations, device ("ALL", "CPU", "GPU"), short_names,
# control_label, test_label. The ops_diff and ops_summary tables, as run_report returns them.
def trace_diff(
    control: List[TraceFile], test: List[TraceFile], options: Dict[str, Any] = ...
) -> List[Tuple[str, List[str], List[Any]]]: ...

# HTA's generate_trace_with_counters: each trace written to its out_path with the queue-length
# and copy-bandwidth counters appended (gzip for a name ending in .gz).
def write_traces_with_counters(
    traces: List[TraceFile], out_paths: List[str], options: Dict[str, Any] = ...
) -> None: ...

# HTA's critical_path_analysis on one trace (options: annotation, instance_start,
# instance_end, data_load_events, add_zero_weight_launch_edges, drop_last_step): the graph as
# numpy arrays and tables (python/opscope/_critical_path.py builds HTA's CPGraph from them), or
# None when the annotation names no event.
def critical_path(trace: TraceFile, options: Dict[str, Any] = ...) -> Optional[Dict[str, Any]]: ...

# HTA's overlaid critical-path trace (gzip JSON); flows as (from_event, from_start, to_event,
# to_start, edge type 0..4, weight in us, critical) tuples.
def write_critical_path_trace(
    trace: TraceFile,
    out_path: str,
    critical_events: List[int],
    flows: List[Tuple[int, bool, int, bool, int, int, bool]],
    only_critical_events: bool,
) -> None: ...

# The flight recorder (python/src/flight_recorder.cpp); opscope.profiler.flight_recorder
# checks the arguments. Dumps return (path, events, open_ranges).
class FlightRecorder:
    running: bool
    def __init__(
        self,
        *,
        keep: float,
        max_bytes: int,
        record_shapes: bool,
        profile_memory: bool,
        with_stack: bool,
        with_flops: bool,
        with_modules: bool,
        slow_step_factor: float,
        slow_step_window: int,
        slow_step_min_interval: float,
        dump_dir: str,
        dump_on_crash: bool,
    ) -> None: ...
    def dump(self, path: str, call: str = ...) -> Tuple[str, int, int]: ...
    def step(self) -> None: ...
    def stop(self) -> None: ...

def flight_recorder_running() -> bool: ...
def dump_flight_recorder(path: str, trigger: str, call: str = ...) -> Tuple[str, int, int]: ...
def flight_dump_path(trigger: str) -> str: ...
def decode_flight_dump(raw_path: str, out_path: str) -> Tuple[str, int, int]: ...
