// The engine of opscope.analysis (python/opscope/analysis.py, HTA's TraceAnalysis): traces read
// by opscope::read_trace and the reports of opscope/trace_analysis.h run by name, their tables
// handed to Python column by column so that pandas builds a DataFrame without a per-row loop.
//
//   t = _C.TraceFile("rank-0.json.gz")                  # read once; the GIL is released
//   for name, columns, data in _C.run_report("temporal", [t], {"drop_last_step": 1}): ...
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "common.h"
#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"

namespace opscope::python {

namespace {

// One trace file read into opscope's result model. Immutable once read, so reports may run on
// it from any thread with the GIL released. It pickles as its path and is read again where it
// is unpickled: a dask worker that must move a trace to another worker re-reads the file
// (which every worker of a job reads from shared storage) instead of shipping the whole model.
struct TraceFile {
  std::string path;
  std::shared_ptr<const ProfilerResult> result;
  TraceLimits limits;  // what it was read within, read within again (unpickled, augmented)
  std::string times = "ns";  // TraceReadOptions::times as times_of() names it
};

// TraceReadOptions::times by the name the Python API gives it.
TraceTimes times_of(const std::string& name) {
  if (name == "ns") return TraceTimes::kNanoseconds;
  if (name == "hta") return TraceTimes::kHtaRounded;
  if (name == "hta_float") return TraceTimes::kHtaFloat;
  throw py::value_error(
      "TraceFile: times is \"ns\" (as written), \"hta\" (HTA's rounding) or "
      "\"hta_float\" (HTA's doubles, HTA_DISABLE_NS_ROUNDING=1), not \"" +
      name + "\"");
}

TraceFile read_trace_file(const std::string& path, double max_gzip_ratio,
                          std::int64_t max_event_size, const std::string& times) {
  if (!(max_gzip_ratio >= 0) || max_event_size < 0) {
    throw py::value_error("TraceFile: max_gzip_ratio and max_event_size are 0 (no limit) or more");
  }
  TraceReadOptions options;
  options.limits.max_gzip_ratio = max_gzip_ratio;
  options.limits.max_event_bytes = max_event_size;
  options.times = times_of(times);
  std::shared_ptr<const ProfilerResult> result;
  {
    // Parsing a trace is seconds of pure C++ for a large one: other Python threads (a dask
    // worker's heartbeats) keep running meanwhile.
    py::gil_scoped_release release;
    result = read_traces(std::span<const std::string>(&path, 1), 0, options).front();
  }
  return TraceFile{path, std::move(result), options.limits, times};
}

// The settings run_report() accepts, each a field of ReportOptions under its own name: one
// table, so that an unknown key's error lists exactly what is allowed.
struct OptionField {
  const char* key;
  std::function<void(ReportOptions&, py::handle)> set;
};

const std::vector<OptionField>& option_fields() {
  static const std::vector<OptionField> fields = {
      {"drop_last_step", [](ReportOptions& o, py::handle v) { o.drop_last_step = v.cast<int>(); }},
      {"first_position",
       [](ReportOptions& o, py::handle v) { o.first_position = v.cast<std::int64_t>(); }},
      {"duration_ratio",
       [](ReportOptions& o, py::handle v) { o.duration_ratio = v.cast<double>(); }},
      {"num_kernels",
       [](ReportOptions& o, py::handle v) { o.num_kernels = v.cast<std::size_t>(); }},
      {"consecutive_kernel_delay_us",
       [](ReportOptions& o, py::handle v) { o.consecutive_kernel_delay_us = v.cast<double>(); }},
      {"runtime_cutoff_us",
       [](ReportOptions& o, py::handle v) { o.runtime_cutoff_us = v.cast<double>(); }},
      {"launch_delay_cutoff_us",
       [](ReportOptions& o, py::handle v) { o.launch_delay_cutoff_us = v.cast<double>(); }},
      {"include_memory_events",
       [](ReportOptions& o, py::handle v) { o.include_memory_events = v.cast<bool>(); }},
      {"operator_name",
       [](ReportOptions& o, py::handle v) { o.operator_name = v.cast<std::string>(); }},
      {"min_pattern_len",
       [](ReportOptions& o, py::handle v) { o.min_pattern_len = v.cast<std::size_t>(); }},
      {"max_queue_length",
       [](ReportOptions& o, py::handle v) { o.max_queue_length = v.cast<std::size_t>(); }},
      {"annotation", [](ReportOptions& o, py::handle v) { o.annotation = v.cast<std::string>(); }},
      {"instance_start",
       [](ReportOptions& o, py::handle v) { o.instance_start = v.cast<std::int64_t>(); }},
      {"instance_end",
       [](ReportOptions& o, py::handle v) { o.instance_end = v.cast<std::int64_t>(); }},
      {"data_load_events",
       [](ReportOptions& o, py::handle v) {
         o.data_load_events = v.cast<std::vector<std::string>>();
       }},
      {"add_zero_weight_launch_edges",
       [](ReportOptions& o, py::handle v) { o.add_zero_weight_launch_edges = v.cast<bool>(); }},
  };
  return fields;
}

ReportOptions options_from(const py::dict& given) {
  ReportOptions options;
  for (const auto& [key, value] : given) {
    const std::string name = py::str(key);
    bool known = false;
    for (const OptionField& f : option_fields()) {
      if (name != f.key) continue;
      try {
        f.set(options, value);
      } catch (const py::cast_error&) {
        throw py::type_error("report option '" + name + "' got " + std::string(py::repr(value)) +
                             " of the wrong type");
      }
      known = true;
      break;
    }
    if (!known) {
      std::string allowed;
      for (const OptionField& f : option_fields()) {
        if (!allowed.empty()) allowed += ", ";
        allowed += f.key;
      }
      throw py::value_error("unknown report option '" + name + "'; options: " + allowed);
    }
  }
  return options;
}

// One column as Python wants it for pandas: a numpy array when every cell is a number (int64
// when all are integers, else float64, where NaN stays NaN), a list of str otherwise. numpy is
// imported only here, when a report is asked for, never by `import opscope`; without numpy the
// numbers come as lists.
py::object column_of(const Report& report, std::size_t c, bool have_numpy) {
  const std::size_t n = report.rows.size();
  bool all_int = true;
  bool all_number = true;
  for (const auto& row : report.rows) {
    const ReportCell& cell = row[c];
    all_int = all_int && std::holds_alternative<std::int64_t>(cell);
    all_number = all_number && !std::holds_alternative<std::string>(cell);
  }
  if (have_numpy && n > 0 && all_int) {
    py::array_t<std::int64_t> a(static_cast<py::ssize_t>(n));
    std::int64_t* out = a.mutable_data();
    for (std::size_t i = 0; i < n; ++i) out[i] = std::get<std::int64_t>(report.rows[i][c]);
    return a;
  }
  if (have_numpy && n > 0 && all_number) {
    py::array_t<double> a(static_cast<py::ssize_t>(n));
    double* out = a.mutable_data();
    for (std::size_t i = 0; i < n; ++i) {
      const ReportCell& cell = report.rows[i][c];
      out[i] = std::holds_alternative<double>(cell)
                   ? std::get<double>(cell)
                   : static_cast<double>(std::get<std::int64_t>(cell));
    }
    return a;
  }
  py::list values(n);
  for (std::size_t i = 0; i < n; ++i) {
    values[i] =
        std::visit([](const auto& v) -> py::object { return py::cast(v); }, report.rows[i][c]);
  }
  return values;
}

bool numpy_available() {
  try {
    py::module_::import("numpy");
    return true;
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    return false;
  }
}

std::vector<std::shared_ptr<const ProfilerResult>> results_of(
    const std::vector<TraceFile>& traces) {
  std::vector<std::shared_ptr<const ProfilerResult>> ranks;
  ranks.reserve(traces.size());
  for (const TraceFile& t : traces) ranks.push_back(t.result);
  return ranks;
}

// Each table as (name, column names, column values).
py::list tables_of(const std::vector<Report>& reports) {
  const bool have_numpy = numpy_available();
  py::list tables;
  for (const Report& r : reports) {
    py::list data;
    for (std::size_t c = 0; c < r.columns.size(); ++c) data.append(column_of(r, c, have_numpy));
    tables.append(py::make_tuple(r.name, py::cast(r.columns), data));
  }
  return tables;
}

py::list run_report_py(const std::string& name, const std::vector<TraceFile>& traces,
                       const py::dict& given) {
  const auto kinds = report_kinds();
  if (std::none_of(kinds.begin(), kinds.end(),
                   [&](const ReportKind& k) { return k.name == name; })) {
    // A wrong name is a wrong argument: ValueError, with the catalog's own message (which lists
    // the names this build has).
    try {
      run_report(name, {}, {});
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
  }
  const ReportOptions options = options_from(given);
  const auto ranks = results_of(traces);
  std::vector<Report> reports;
  {
    py::gil_scoped_release release;
    reports = run_report(name, ranks, options);
  }
  return tables_of(reports);
}

// HTA's TraceDiff on two sides' traces. `given`: control_ranks, test_ranks,
// control_iterations, test_iterations (lists of ints; empty: the smallest), device ("ALL",
// "CPU", "GPU"), short_names, control_label, test_label.
py::list trace_diff_py(const std::vector<TraceFile>& control, const std::vector<TraceFile>& test,
                       const py::dict& given) {
  DiffOptions options;
  for (const auto& [key, value] : given) {
    const std::string name = py::str(key);
    if (name == "control_ranks") {
      options.control_ranks = value.cast<std::vector<std::int64_t>>();
    } else if (name == "test_ranks") {
      options.test_ranks = value.cast<std::vector<std::int64_t>>();
    } else if (name == "control_iterations") {
      options.control_iterations = value.cast<std::vector<std::int64_t>>();
    } else if (name == "test_iterations") {
      options.test_iterations = value.cast<std::vector<std::int64_t>>();
    } else if (name == "device") {
      const std::string d = value.cast<std::string>();
      if (d == "ALL") {
        options.device = DiffOptions::Device::kAll;
      } else if (d == "CPU") {
        options.device = DiffOptions::Device::kCpu;
      } else if (d == "GPU") {
        options.device = DiffOptions::Device::kGpu;
      } else {
        throw py::value_error("diff option 'device' expects ALL, CPU or GPU, got '" + d + "'");
      }
    } else if (name == "short_names") {
      options.short_names = value.cast<bool>();
    } else if (name == "control_label") {
      options.control_label = value.cast<std::string>();
    } else if (name == "test_label") {
      options.test_label = value.cast<std::string>();
    } else {
      throw py::value_error("unknown diff option '" + name +
                            "'; options: control_ranks, test_ranks, control_iterations, "
                            "test_iterations, device, short_names, control_label, test_label");
    }
  }
  const auto c = results_of(control);
  const auto t = results_of(test);
  std::vector<Report> reports;
  {
    py::gil_scoped_release release;
    reports = trace_diff(c, t, options);
  }
  return tables_of(reports);
}

// ReportMethod::Form as opscope.analysis names it.
std::string_view form_name(ReportMethod::Form form) {
  switch (form) {
    case ReportMethod::Form::kHandWritten:
      break;
    case ReportMethod::Form::kJobTable:
      return "job_table";
    case ReportMethod::Form::kRankTable:
      return "rank_table";
    case ReportMethod::Form::kDescribe:
      return "describe";
    case ReportMethod::Form::kSeries:
      return "series";
  }
  return "hand_written";
}

void write_traces_with_counters_py(const std::vector<TraceFile>& traces,
                                   const std::vector<std::string>& out_paths,
                                   const py::dict& given) {
  if (out_paths.size() != traces.size()) {
    throw py::value_error("write_traces_with_counters: " + std::to_string(traces.size()) +
                          " traces but " + std::to_string(out_paths.size()) + " output paths");
  }
  const ReportOptions options = options_from(given);
  const auto ranks = results_of(traces);
  std::vector<std::string> paths;
  // Each file read again within the widest of the limits the traces were read within.
  TraceLimits limits = traces.empty() ? TraceLimits{} : traces.front().limits;
  for (const TraceFile& t : traces) {
    paths.push_back(t.path);
    if (t.limits.max_gzip_ratio == 0 || limits.max_gzip_ratio == 0) {
      limits.max_gzip_ratio = 0;
    } else {
      limits.max_gzip_ratio = std::max(limits.max_gzip_ratio, t.limits.max_gzip_ratio);
    }
  }
  py::gil_scoped_release release;
  write_traces_with_counters(ranks, paths, out_paths, options, limits);
}

template <typename T, typename U = T>
py::array_t<U> array_of(const std::vector<T>& v) {
  py::array_t<U> a(static_cast<py::ssize_t>(v.size()));
  U* out = a.mutable_data();
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<U>(v[i]);
  return a;
}

// HTA's critical_path_analysis on one trace: the graph as numpy arrays (one bulk hand-over;
// python/opscope/_critical_path.py builds HTA's CPGraph from them), with a table of the events
// the nodes and attributions name. None when the annotation names no event (HTA: None).
py::object critical_path_py(const TraceFile& trace, const py::dict& given) {
  const ReportOptions options = options_from(given);
  CriticalPathGraph g;
  {
    py::gil_scoped_release release;
    g = critical_path_graph(*trace.result, options);
  }
  if (!g.found) return py::none();
  const ProfilerResult& r = *trace.result;
  // The events named by nodes or attributions, once each, in index order.
  std::vector<std::int32_t> named(g.node_event);
  for (const std::int64_t e : g.edge_event) {
    if (e >= 0) named.push_back(static_cast<std::int32_t>(e));
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  py::list names, s_names, cats;
  std::vector<std::int64_t> pids, tids, streams;
  for (const std::int32_t k : named) {
    const Event& e = r.events()[static_cast<std::size_t>(k)];
    names.append(py::str(std::string(e.name)));
    s_names.append(py::str(shorten_name(e.name)));
    cats.append(py::str(std::string(r.category(e))));
    const ThreadInfo& t = r.threads()[static_cast<std::size_t>(e.thread)];
    pids.push_back(t.pid >= 0 ? t.pid : r.pid());
    tids.push_back(static_cast<std::int64_t>(t.tid));
    const EventDetail* d = r.detail(e);
    streams.push_back(d != nullptr && e.kind != EventKind::kRange &&
                              e.kind != EventKind::kGpuAnnotation
                          ? d->gpu.stream
                          : -1);
  }
  std::vector<std::uint8_t> types(g.edge_type.size());
  for (std::size_t i = 0; i < types.size(); ++i)
    types[i] = static_cast<std::uint8_t>(g.edge_type[i]);
  py::dict out;
  out["valid"] = g.valid;
  out["warnings"] = py::cast(g.warnings);
  out["node_event"] = array_of<std::int32_t, std::int64_t>(g.node_event);
  out["node_ts_ns"] = array_of(g.node_ts_ns);
  out["node_is_start"] = array_of<std::uint8_t, bool>(g.node_is_start);
  out["node_is_blocking"] = array_of<std::uint8_t, bool>(g.node_is_blocking);
  out["edge_begin"] = array_of<std::int32_t, std::int64_t>(g.edge_begin);
  out["edge_end"] = array_of<std::int32_t, std::int64_t>(g.edge_end);
  out["edge_type"] = array_of<std::uint8_t, std::int64_t>(types);
  out["edge_weight_ns"] = array_of(g.edge_weight_ns);
  out["edge_graph_weight_ns"] = array_of(g.edge_graph_weight_ns);
  out["edge_event"] = array_of(g.edge_event);
  out["no_event"] = CriticalPathGraph::kNoEvent;
  out["graph_nodes"] = array_of<std::int32_t, std::int64_t>(g.graph_nodes);
  out["path_nodes"] = array_of<std::int32_t, std::int64_t>(g.path_nodes);
  out["path_edges"] = array_of<std::int32_t, std::int64_t>(g.path_edges);
  out["path_length_ns"] = g.path_length_ns;
  // The cudaEventRecord and cudaStreamWaitEvent tables HTA's CPGraph exposes (pid, tid, ts in
  // us, correlation of each call; the launch it pairs with and that launch's correlation).
  const auto call_table = [&](const auto& rows, const char* launch_key, const char* launch_corr,
                              auto stream_of_row, auto launch_of_row) {
    std::vector<std::int64_t> index, pid, tid, corr, stream, launch, launch_c;
    std::vector<double> ts;
    py::list name;
    for (const auto& row : rows) {
      const Event& e = r.events()[static_cast<std::size_t>(row.event)];
      const ThreadInfo& t = r.threads()[static_cast<std::size_t>(e.thread)];
      index.push_back(row.event);
      pid.push_back(t.pid >= 0 ? t.pid : r.pid());
      tid.push_back(static_cast<std::int64_t>(t.tid));
      ts.push_back(static_cast<double>(e.start_ns) / 1000.0);
      name.append(py::str(std::string(e.name)));
      const EventDetail* d = r.detail(e);
      corr.push_back(d != nullptr ? d->gpu.correlation : -1);
      stream.push_back(stream_of_row(row));
      const std::int32_t l = launch_of_row(row);
      launch.push_back(l);
      const EventDetail* ld = l >= 0 ? r.detail(r.events()[static_cast<std::size_t>(l)]) : nullptr;
      launch_c.push_back(ld != nullptr ? ld->gpu.correlation : -1);
    }
    py::dict table;
    table["index"] = array_of(index);
    table["pid"] = array_of(pid);
    table["tid"] = array_of(tid);
    table["ts"] = array_of(ts);
    table["name"] = name;
    table["correlation"] = array_of(corr);
    table["stream"] = array_of(stream);
    table[launch_key] = array_of(launch);
    table[launch_corr] = array_of(launch_c);
    return table;
  };
  out["event_records"] = call_table(
      g.event_records, "index_previous_launch", "correlation_launch_event",
      [](const auto& row) { return row.stream; },
      [](const auto& row) { return row.previous_launch; });
  {
    std::vector<std::int64_t> gpu;
    for (const auto& row : g.event_records) gpu.push_back(row.gpu);
    py::dict table = out["event_records"].cast<py::dict>();
    table["gpu"] = array_of(gpu);
  }
  out["stream_waits"] = call_table(
      g.stream_waits, "index_next_launch", "correlation_next_launch",
      [](const auto& row) { return row.stream; }, [](const auto& row) { return row.next_launch; });
  py::dict events;
  events["index"] = array_of<std::int32_t, std::int64_t>(named);
  events["name"] = names;
  events["s_name"] = s_names;
  events["cat"] = cats;
  events["pid"] = array_of(pids);
  events["tid"] = array_of(tids);
  events["stream"] = array_of(streams);
  out["events"] = events;
  return out;
}

void write_critical_path_trace_py(const TraceFile& trace, const std::string& out_path,
                                  const std::vector<std::int32_t>& critical_events,
                                  const std::vector<py::tuple>& flows, bool only_critical_events) {
  std::vector<CriticalPathFlow> fs;
  fs.reserve(flows.size());
  const auto n = static_cast<std::int64_t>(trace.result->events().size());
  for (const py::tuple& t : flows) {
    CriticalPathFlow f;
    f.from_event = t[0].cast<std::int32_t>();
    f.from_start = t[1].cast<bool>();
    f.to_event = t[2].cast<std::int32_t>();
    f.to_start = t[3].cast<bool>();
    const int type = t[4].cast<int>();
    if (type < 0 || type > 4) {
      throw py::value_error("write_critical_path_trace: edge type " + std::to_string(type) +
                            " is not 0..4");
    }
    f.type = static_cast<CriticalPathEdgeType>(type);
    f.weight_us = t[5].cast<std::int64_t>();
    f.critical = t[6].cast<bool>();
    if (f.from_event < 0 || f.from_event >= n || f.to_event < 0 || f.to_event >= n) {
      throw py::value_error("write_critical_path_trace: flow between events " +
                            std::to_string(f.from_event) + " and " + std::to_string(f.to_event) +
                            "; the trace has events 0.." + std::to_string(n - 1));
    }
    fs.push_back(f);
  }
  py::gil_scoped_release release;
  write_critical_path_trace(*trace.result, out_path, critical_events, fs, only_critical_events);
}

}  // namespace

void bind_analysis(py::module_& m) {
  py::class_<TraceFile>(m, "TraceFile",
                        "A trace file (Kineto's or opscope's, .json or .json.gz) read for "
                        "opscope.analysis. Pickles as its path; unpickling reads the file again.")
      .def(py::init(&read_trace_file), py::arg("path"),
           py::arg("max_gzip_ratio") = TraceLimits{}.max_gzip_ratio,
           py::arg("max_event_size") = TraceLimits{}.max_event_bytes, py::arg("times") = "ns",
           "Reads the trace at `path` (the GIL is released while it parses); RuntimeError "
           "with the reader's message when the file is missing or not a trace. The limits "
           "(opscope::TraceLimits; 0: none) refuse a hostile file before it takes memory "
           "without bound: a gzip text inflating past max_gzip_ratio times the file's size "
           "(and 64 MiB), an event of more than max_event_size bytes. times "
           "(opscope::TraceTimes): \"ns\" keeps the nanoseconds as written; \"hta\" rounds "
           "each event inward to whole microseconds as HTA does a trace whose ts have "
           "fractions; \"hta_float\" holds each ts as the double HTA reads "
           "(HTA_DISABLE_NS_ROUNDING=1).")
      .def_property_readonly(
          "times", [](const TraceFile& t) { return t.times; },
          "How its times are held: the constructor's times.")
      .def_property_readonly("path", [](const TraceFile& t) { return t.path; })
      .def_property_readonly(
          "rank", [](const TraceFile& t) { return t.result->rank(); },
          "The trace's distributedInfo.rank, or -1 when it has none.")
      .def(
          "profiler_step_names", [](const TraceFile& t) { return profiler_step_names(*t.result); },
          "The distinct ProfilerStep#N names in the trace, sorted.")
      .def("__repr__",
           [](const TraceFile& t) {
             return "TraceFile(" + std::string(py::repr(py::str(t.path))) + ")";
           })
      .def("__reduce__", [](const TraceFile& t) {
        return py::make_tuple(
            py::module_::import("opscope._C").attr("TraceFile"),
            py::make_tuple(t.path, t.limits.max_gzip_ratio, t.limits.max_event_bytes, t.times));
      });

  m.def(
      "report_kinds",
      [] {
        py::list out;
        for (const ReportKind& k : report_kinds()) {
          py::list options;
          for (const std::string_view o : k.options) options.append(std::string(o));
          py::list methods;
          for (const ReportMethod& method : k.methods) {
            methods.append(py::make_tuple(std::string(method.name), std::string(method.table),
                                          std::string(form_name(method.form)),
                                          std::string(method.doc), std::string(method.series)));
          }
          out.append(py::make_tuple(std::string(k.name), std::string(k.hta), std::string(k.summary),
                                    options, methods));
        }
        return out;
      },
      "The reports run_report knows, as (name, HTA method, summary, options, methods) tuples: "
      "options the report_options keys it reads (beyond drop_last_step and first_position), "
      "methods the TraceAnalysis methods it answers as (name, table, form, docstring, series) "
      "with form one of hand_written, job_table, rank_table, describe, series.");
  m.def("run_report", &run_report_py, py::arg("name"), py::arg("traces"),
        py::arg("options") = py::dict(),
        "Runs report `name` over `traces` (the ranks of a job, in their positions) with the "
        "ReportOptions fields named in `options`; the GIL is released while it runs. Returns a "
        "list of (table name, column names, column values) with each column a numpy array "
        "(numbers) or a list (text).");
  m.def(
      "shorten_name", [](std::string_view name) { return shorten_name(name); }, py::arg("name"),
      "HTA's shorten_name: a kernel or operator name without its return type, template and "
      "function arguments; memory kernels' names unchanged.");
  m.def("trace_diff", &trace_diff_py, py::arg("control"), py::arg("test"),
        py::arg("options") = py::dict(),
        "HTA's TraceDiff between two lists of traces (the ranks of each side); `options`: "
        "control_ranks, test_ranks, control_iterations, test_iterations (lists of ints), "
        "device (ALL, CPU, GPU), short_names, control_label, test_label. Returns the ops_diff "
        "and ops_summary tables as run_report does.");
  m.def("critical_path", &critical_path_py, py::arg("trace"), py::arg("options") = py::dict(),
        "HTA's critical_path_analysis on one trace with the report options annotation, "
        "instance_start, instance_end, data_load_events, add_zero_weight_launch_edges: a dict "
        "of numpy arrays (nodes, edges, the longest path) and an events table, or None when "
        "the annotation names no event. The GIL is released while the graph is built.");
  m.def("write_critical_path_trace", &write_critical_path_trace_py, py::arg("trace"),
        py::arg("out_path"), py::arg("critical_events"), py::arg("flows"),
        py::arg("only_critical_events"),
        "HTA's overlaid critical-path trace (gzip JSON) of `trace` at out_path: critical_events "
        "marked args.critical, flows as (from_event, from_start, to_event, to_start, type, "
        "weight_us, critical) tuples.");
  m.def("write_traces_with_counters", &write_traces_with_counters_py, py::arg("traces"),
        py::arg("out_paths"), py::arg("options") = py::dict(),
        "HTA's generate_trace_with_counters: each trace written to its out_path with the "
        "queue-length and copy-bandwidth counters added (gzip for a name ending in .gz).");
}

}  // namespace opscope::python
