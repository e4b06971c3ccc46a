// What a finished window holds, for Python: Result (exports), EventList and FunctionEvent
// (profile.events()), KeyAverages and FunctionEventAvg (profile.key_averages()).
//
// Names and units follow torch.autograd.profiler_util where they exist: times as float
// microseconds (cpu_time_total, self_cpu_time_total, ...), ids, thread ids, input shapes as
// lists. Everything that can take long (exports, key_averages, table) runs with the GIL
// released; the objects only read the immutable ProfilerResult.
#include "results.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "common.h"
#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/memory.h"

namespace opscope::python {

std::vector<std::string> ResultView::stack(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!texts_) texts_ = std::make_unique<EventTexts>(*result_);
  return texts_->stack(event);
}

std::int64_t ResultView::memory(std::size_t index, bool self, DeviceType device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!memory_) memory_ = event_memory(*result_);
  const EventMemory::Bytes& on = device == DeviceType::kCUDA ? memory_->cuda : memory_->cpu;
  const std::vector<std::int64_t>& bytes = self ? on.self : on.total;
  return index < bytes.size() ? bytes[index] : 0;
}

std::int64_t ResultView::cuda(std::size_t index, bool self) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!cuda_) cuda_ = event_cuda(*result_);
  const std::vector<std::int64_t>& ns = self ? cuda_->self : cuda_->total;
  return index < ns.size() ? ns[index] : 0;
}

std::vector<std::int32_t> ResultView::gpu_events_of(std::size_t index, bool* spans) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!gpu_events_) {
    const GpuAttribution a = gpu_attribution(*result_);
    gpu_events_.emplace();
    for (const auto& [op, gpu] : a.links) (*gpu_events_)[op].push_back(gpu);
    gpu_spans_ = a.spans;
  }
  *spans = gpu_spans_;
  const auto it = gpu_events_->find(static_cast<std::int32_t>(index));
  return it != gpu_events_->end() ? it->second : std::vector<std::int32_t>{};
}

std::vector<FunctionEventAvg> ResultView::rows(std::span<const std::int32_t> events) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!memory_) memory_ = event_memory(*result_);
  if (!cuda_) cuda_ = event_cuda(*result_);
  if (!texts_) texts_ = std::make_unique<EventTexts>(*result_);
  return texts_->rows(events, *memory_, *cuda_);
}

namespace {

using Release = py::call_guard<py::gil_scoped_release>;

double ns_to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// One event of a result; keeps the result alive.
struct FunctionEvent {
  std::shared_ptr<ResultView> view;
  std::int32_t index;

  const Event& event() const { return view->result().events()[static_cast<std::size_t>(index)]; }
  const EventDetail* detail() const { return view->result().detail(event()); }
  // Bytes on `device` this event accounts for, as torch's FunctionEvent: a range's reports
  // (children included, or not), a "[memory]" event's own bytes.
  std::int64_t memory(bool self, DeviceType device) const {
    return view->memory(static_cast<std::size_t>(index), self, device);
  }
};

// The torch.autograd.profiler_util.Interval of an event, in us since the window's start.
py::object time_range(const FunctionEvent& f) {
  const std::int64_t base = f.view->result().start_time_ns();
  return py::module_::import("opscope.profiler_util")
      .attr("Interval")(ns_to_us(f.event().start_ns - base), ns_to_us(f.event().end_ns - base));
}

// The rows a table or an average is made of, from a list of FunctionEvent or FunctionEventAvg
// (what EventList holds), in their order; events may come from several windows.
std::vector<FunctionEventAvg> rows_of(const py::list& items) {
  std::vector<FunctionEventAvg> rows;
  std::shared_ptr<ResultView> view;
  std::vector<std::int32_t> indices;
  const auto flush = [&] {
    if (indices.empty()) return;
    std::vector<FunctionEventAvg> more = value_errors([&] { return view->rows(indices); });
    rows.insert(rows.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
    indices.clear();
  };
  for (const py::handle item : items) {
    if (py::isinstance<FunctionEventAvg>(item)) {
      flush();
      rows.push_back(item.cast<FunctionEventAvg>());
      continue;
    }
    if (!py::isinstance<FunctionEvent>(item)) {
      throw py::type_error("an EventList holds FunctionEvent or FunctionEventAvg objects, got " +
                           std::string(py::str(py::type::of(item).attr("__name__"))));
    }
    const auto& f = item.cast<const FunctionEvent&>();
    if (view && f.view != view) flush();  // events of another window (acc_events)
    view = f.view;
    indices.push_back(f.index);
  }
  flush();
  return rows;
}

// The first event averaged into a FunctionEventAvg, or None: its `_first`, which add() sets
// and key_averages() has found when `_find_first` (opscope/profiler_util.py) is called: the
// events are looked through only when a row's tree or scope is first asked for.
py::object first_of(const py::object& row) {
  py::object first = py::getattr(row, "_first", py::none());
  if (first.is_none()) {
    const py::object find = py::getattr(row, "_find_first", py::none());
    if (!find.is_none()) {
      find();
      first = py::getattr(row, "_first", py::none());
    }
  }
  return first;
}

// `attribute` of a FunctionEventAvg's first event, or None when there is none.
py::object first_member(const py::object& row, const char* attribute) {
  const py::object first = first_of(row);
  return first.is_none() ? py::object(py::none()) : py::getattr(first, attribute);
}

// The shapes text of a FunctionEventAvg ("[[32, 64], []]") as torch's list of lists; as in
// torch, "" when the averages were not grouped by input shape.
py::object shapes_list(const std::string& text) {
  if (text.empty()) return py::str("");
  return py::module_::import("json").attr("loads")(text);
}

std::string_view kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kRange:
      return "range";
    case EventKind::kAsyncRange:
      return "async_range";
    case EventKind::kInstant:
      return "instant";
    case EventKind::kMemory:
      return "memory";
    case EventKind::kKernel:
      return "kernel";
    case EventKind::kMemcpy:
      return "memcpy";
    case EventKind::kMemset:
      return "memset";
    case EventKind::kRuntime:
      return "runtime";
    case EventKind::kDriver:
      return "driver";
    case EventKind::kGpuAnnotation:
      return "gpu_annotation";
    case EventKind::kOther:
      return "other";
  }
  return "unknown";
}

// A recorded input's shape as torch lists it: the sizes of a tensor, a list of those for a
// list of tensors, [] for anything else.
py::list shape_of(const RecordedValue& v) {
  py::list out;
  if (v.kind == ValueKind::kTensor) {
    for (std::int64_t s : v.sizes) out.append(s);
  } else if (v.kind == ValueKind::kList) {
    bool tensors = !v.items.empty();
    for (const RecordedValue& item : v.items) tensors = tensors && item.kind == ValueKind::kTensor;
    if (tensors) {
      for (const RecordedValue& item : v.items) out.append(shape_of(item));
    }
  }
  return out;
}

py::object event_at(const std::shared_ptr<ResultView>& view, std::int32_t index) {
  if (index < 0) return py::none();
  return py::cast(FunctionEvent{view, index});
}

KeyAverages averages(const ResultView& view, bool group_by_input_shape, int group_by_stack_n) {
  return value_errors(
      [&] { return key_averages(view.result(), group_by_input_shape, group_by_stack_n); });
}

std::string table(const KeyAverages& k, const std::optional<std::string>& sort_by, int row_limit,
                  int max_src_column_width, int max_name_column_width, int max_shapes_column_width,
                  const std::optional<std::string>& header, bool top_level_events_only,
                  const std::optional<std::string>& time_unit) {
  TableOptions o;
  o.time_unit = time_unit.value_or("");
  o.sort_by = sort_by.value_or("");
  o.row_limit = row_limit;
  o.max_src_column_width = max_src_column_width;
  o.max_name_column_width = max_name_column_width;
  o.max_shapes_column_width = max_shapes_column_width;
  o.header = header.value_or("");
  o.top_level_events_only = top_level_events_only;
  return value_errors([&] { return k.table(o); });
}

// The GPU time of a single event (ns): an operator's launched work, its children's included or
// not; GPU work's own duration.
std::int64_t cuda_ns(const FunctionEvent& e, bool self) {
  return e.view->cuda(static_cast<std::size_t>(e.index), self);
}
std::int64_t cuda_ns(const FunctionEventAvg& r, bool self) {
  return self ? r.self_cuda_time_total_ns : r.cuda_time_total_ns;
}
std::int64_t calls(const FunctionEvent&) { return 1; }
std::int64_t calls(const FunctionEventAvg& r) { return r.count; }
bool is_device(const FunctionEvent& e) {
  const EventKind k = e.event().kind;
  return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset;
}
bool is_device(const FunctionEventAvg& r) { return r.is_device; }
// torch: events whose CUDA time came from CUDA events (the legacy profiler's way).
bool is_legacy(const FunctionEvent& e) {
  bool spans = false;
  return !e.view->gpu_events_of(static_cast<std::size_t>(e.index), &spans).empty() && spans;
}
bool is_legacy(const FunctionEventAvg&) { return false; }

// What a FunctionEvent or FunctionEventAvg says of CUDA, its device and the legacy profiler,
// as torch's do: CUDA time from the GPU work launched inside (zero without any), the device
// CUDA for GPU work's own rows.
template <typename T>
void def_device_fields(py::module_& m, const char* name) {
  auto cls = py::reinterpret_borrow<py::class_<T>>(m.attr(name));
  const auto avg_us = [](const T& t) {
    const std::int64_t n = calls(t);
    return n == 0 ? 0.0 : ns_to_us(cuda_ns(t, false)) / static_cast<double>(n);
  };
  cls.def_property_readonly("cuda_time", avg_us);
  cls.def_property_readonly("cuda_time_total",
                            [](const T& t) { return ns_to_us(cuda_ns(t, false)); });
  cls.def_property_readonly("self_cuda_time_total",
                            [](const T& t) { return ns_to_us(cuda_ns(t, true)); });
  cls.def_property_readonly("cuda_time_str",
                            [avg_us](const T& t) { return format_time_us(avg_us(t)); });
  cls.def_property_readonly("cuda_time_total_str",
                            [](const T& t) { return format_time_us(ns_to_us(cuda_ns(t, false))); });
  cls.def_property_readonly("self_cuda_time_total_str",
                            [](const T& t) { return format_time_us(ns_to_us(cuda_ns(t, true))); });
  // torch 2.x's names for the same figures (it renamed cuda_* to device_*, and keeps cuda_*
  // as deprecated aliases); use_device names a PrivateUse1 backend, none here.
  cls.def_property_readonly("device_time", avg_us);
  cls.def_property_readonly("device_time_total",
                            [](const T& t) { return ns_to_us(cuda_ns(t, false)); });
  cls.def_property_readonly("self_device_time_total",
                            [](const T& t) { return ns_to_us(cuda_ns(t, true)); });
  cls.def_property_readonly("device_time_str",
                            [avg_us](const T& t) { return format_time_us(avg_us(t)); });
  cls.def_property_readonly("device_time_total_str",
                            [](const T& t) { return format_time_us(ns_to_us(cuda_ns(t, false))); });
  cls.def_property_readonly("self_device_time_total_str",
                            [](const T& t) { return format_time_us(ns_to_us(cuda_ns(t, true))); });
  cls.def_property_readonly("use_device", [](const T&) { return py::none(); });
  cls.def_property_readonly("device_type", [](const T& t) {
    return is_device(t) ? DeviceType::kCUDA : DeviceType::kCPU;
  });
  cls.def_property_readonly("is_legacy", [](const T& t) { return is_legacy(t); });
}

// torch's FunctionEvent.kernels: Kernel(name, device, duration in us) for each GPU event that
// makes up its CUDA time (work launched inside it, or its CUDA-event span).
py::list kernels_of(const FunctionEvent& f) {
  bool spans = false;
  py::list out;
  const py::object kernel = py::module_::import("opscope.profiler_util").attr("Kernel");
  for (const std::int32_t g : f.view->gpu_events_of(static_cast<std::size_t>(f.index), &spans)) {
    const Event& e = f.view->result().events()[static_cast<std::size_t>(g)];
    const EventDetail* d = f.view->result().detail(e);
    out.append(
        kernel(std::string(e.name), d != nullptr ? d->gpu.device : -1, ns_to_us(e.duration_ns())));
  }
  return out;
}

}  // namespace

void bind_results(py::module_& m) {
  py::enum_<DeviceType>(m, "DeviceType", "Where an event ran (torch.autograd.DeviceType).")
      .value("CPU", DeviceType::kCPU)
      .value("CUDA", DeviceType::kCUDA);

  py::class_<ResultView, std::shared_ptr<ResultView>>(m, "Result",
                                                      "One finished recording window (immutable).")
      .def("function_events",
           [](const std::shared_ptr<ResultView>& v) {
             py::list out;
             const auto n = static_cast<std::int32_t>(v->result().events().size());
             for (std::int32_t i = 0; i < n; ++i) out.append(FunctionEvent{v, i});
             return out;
           })
      .def("key_averages", &averages, py::arg("group_by_input_shape") = false,
           py::arg("group_by_stack_n") = 0, Release())
      .def(
          "key_averages_of",
          [](const ResultView& v, std::optional<std::vector<std::int32_t>> indices, bool by_shape,
             int by_stack) {
            KeyAverages k = value_errors([&] {
              return indices ? key_averages(v.result(), *indices, by_shape, by_stack)
                             : key_averages(v.result(), by_shape, by_stack);
            });
            return std::move(k.rows());
          },
          py::arg("indices"), py::arg("group_by_input_shape") = false,
          py::arg("group_by_stack_n") = 0, Release())
      .def(
          "export_chrome_trace",
          [](const ResultView& v, const std::string& path) {
            export_trace(v.result(), path, "chrome");
          },
          py::arg("path"), Release())
      .def(
          "export_trace",
          [](const ResultView& v, const std::string& path, const std::string& format) {
            export_trace(v.result(), path, format);
          },
          py::arg("path"), py::arg("format") = "", Release())
      .def(
          "chrome_trace_json", [](const ResultView& v) { return chrome_trace_json(v.result()); },
          Release())
      .def(
          "export_stacks",
          [](const ResultView& v, const std::string& path, const std::string& metric) {
            export_stacks(v.result(), path, metric);
          },
          py::arg("path"), py::arg("metric") = "self_cpu_time_total", Release())
      .def(
          "export_memory_timeline",
          [](const ResultView& v, const std::string& path, const std::string& device) {
            export_memory_timeline(v.result(), path, device);
          },
          py::arg("path"), py::arg("device") = "cpu", Release())
      .def_property_readonly("metadata", [](const ResultView& v) { return v.result().metadata(); })
      .def_property_readonly("pid", [](const ResultView& v) { return v.result().pid(); })
      .def_property_readonly("start_time_ns",
                             [](const ResultView& v) { return v.result().start_time_ns(); })
      .def_property_readonly("end_time_ns",
                             [](const ResultView& v) { return v.result().end_time_ns(); })
      .def_property_readonly("threads", [](const ResultView& v) {
        py::list out;
        for (const ThreadInfo& t : v.result().threads()) out.append(py::make_tuple(t.tid, t.name));
        return out;
      });

  m.def(
      "table_of",
      [](const py::list& items, bool profile_memory, bool with_flops,
         const std::optional<std::string>& sort_by, int row_limit, int max_src_column_width,
         int max_name_column_width, int max_shapes_column_width,
         const std::optional<std::string>& header, bool top_level_events_only,
         const std::optional<std::string>& time_unit) {
        KeyAverages k(rows_of(items));
        k.profile_memory = profile_memory;
        k.with_flops = with_flops;
        py::gil_scoped_release release;
        return table(k, sort_by, row_limit, max_src_column_width, max_name_column_width,
                     max_shapes_column_width, header, top_level_events_only, time_unit);
      },
      "The operator table of FunctionEvent or FunctionEventAvg objects (EventList.table()).",
      py::arg("items"), py::kw_only(), py::arg("profile_memory") = false,
      py::arg("with_flops") = false, py::arg("sort_by") = py::none(), py::arg("row_limit") = 100,
      py::arg("max_src_column_width") = 75, py::arg("max_name_column_width") = 55,
      py::arg("max_shapes_column_width") = 80, py::arg("header") = py::none(),
      py::arg("top_level_events_only") = false, py::arg("time_unit") = py::none());
  m.def(
      "total_average_of",
      [](const py::list& items) {
        FunctionEventAvg total;
        for (const FunctionEventAvg& r : rows_of(items)) total.add(r);
        total.key = "Total";
        return total;
      },
      "All the items summed into one FunctionEventAvg keyed \"Total\" (EventList.total_average()).",
      py::arg("items"));

  py::class_<FunctionEvent>(m, "FunctionEvent", "One recorded event.")
      .def_property_readonly("_result", [](const FunctionEvent& f) { return f.view; })
      .def_property_readonly("_index", [](const FunctionEvent& f) { return f.index; })
      .def_property_readonly("id", [](const FunctionEvent& f) { return f.event().handle; })
      // As torch: the steps' ranges are "ProfilerStep*" here and keep their number in
      // trace_name (and in the Chrome trace).
      .def_property_readonly("name",
                             [](const FunctionEvent& f) { return row_name(f.event().name); })
      .def_property_readonly("key", [](const FunctionEvent& f) { return row_name(f.event().name); })
      .def_property_readonly("trace_name", [](const FunctionEvent& f) { return f.event().name; })
      .def_property_readonly("kind",
                             [](const FunctionEvent& f) { return kind_name(f.event().kind); })
      .def_property_readonly(
          "scope", [](const FunctionEvent& f) { return static_cast<int>(f.event().scope); })
      .def_property_readonly("scope_name",
                             [](const FunctionEvent& f) { return scope_name(f.event().scope); })
      .def_property_readonly("count", [](const FunctionEvent&) { return 1; })
      .def_property_readonly(
          "cpu_time", [](const FunctionEvent& f) { return ns_to_us(f.event().duration_ns()); })
      .def_property_readonly(
          "cpu_time_str",
          [](const FunctionEvent& f) { return format_time_us(ns_to_us(f.event().duration_ns())); })
      .def_property_readonly(
          "cpu_time_total_str",
          [](const FunctionEvent& f) { return format_time_us(ns_to_us(f.event().duration_ns())); })
      .def_property_readonly(
          "self_cpu_time_total_str",
          [](const FunctionEvent& f) { return format_time_us(ns_to_us(f.event().self_ns)); })
      .def_property_readonly("time_range", &time_range)
      .def_property_readonly("is_remote", [](const FunctionEvent&) { return false; })
      .def_property_readonly("kernels", &kernels_of)
      .def_property_readonly("device_index", [](const FunctionEvent&) { return 0; })
      // torch 2.x: a CPU event's resource is its thread; keyword inputs (none recorded here);
      // the table's percentages, -1 until torch's table code fills them in.
      .def_property_readonly(
          "device_resource_id",
          [](const FunctionEvent& f) { return f.view->result().threads()[f.event().thread].tid; })
      .def_property_readonly("kwinputs", [](const FunctionEvent&) { return py::dict(); })
      .def_property_readonly("self_cpu_percent", [](const FunctionEvent&) { return -1; })
      .def_property_readonly("total_cpu_percent", [](const FunctionEvent&) { return -1; })
      .def_property_readonly("total_device_percent", [](const FunctionEvent&) { return -1; })
      .def_property_readonly(
          "is_async",
          [](const FunctionEvent& f) { return f.event().kind == EventKind::kAsyncRange; })
      .def_property_readonly(
          "is_user_annotation",
          [](const FunctionEvent& f) { return f.event().scope == RecordScope::kUserScope; })
      .def_property_readonly(
          "thread",
          [](const FunctionEvent& f) { return f.view->result().threads()[f.event().thread].tid; })
      .def_property_readonly(
          "thread_name",
          [](const FunctionEvent& f) { return f.view->result().threads()[f.event().thread].name; })
      .def_property_readonly("start_ns", [](const FunctionEvent& f) { return f.event().start_ns; })
      .def_property_readonly("end_ns", [](const FunctionEvent& f) { return f.event().end_ns; })
      .def_property_readonly(
          "start_us",
          [](const FunctionEvent& f) {
            return ns_to_us(f.event().start_ns - f.view->result().start_time_ns());
          })
      .def_property_readonly("end_us",
                             [](const FunctionEvent& f) {
                               return ns_to_us(f.event().end_ns - f.view->result().start_time_ns());
                             })
      .def_property_readonly(
          "cpu_time_total",
          [](const FunctionEvent& f) { return ns_to_us(f.event().duration_ns()); })
      .def_property_readonly("self_cpu_time_total",
                             [](const FunctionEvent& f) { return ns_to_us(f.event().self_ns); })
      .def_property_readonly("sequence_nr",
                             [](const FunctionEvent& f) { return f.event().sequence_nr; })
      .def_property_readonly("fwd_thread",
                             [](const FunctionEvent& f) { return f.event().forward_thread_id; })
      .def_property_readonly(
          "cpu_parent", [](const FunctionEvent& f) { return event_at(f.view, f.event().parent); })
      .def_property_readonly(
          "cpu_children",
          [](const FunctionEvent& f) {
            py::list out;
            for (std::int32_t c : f.view->result().children(static_cast<std::size_t>(f.index))) {
              out.append(event_at(f.view, c));
            }
            return out;
          })
      .def_property_readonly("input_shapes",
                             [](const FunctionEvent& f) {
                               py::list out;
                               if (const EventDetail* d = f.detail()) {
                                 for (const RecordedValue& v : d->inputs) out.append(shape_of(v));
                               }
                               return out;
                             })
      .def_property_readonly("input_types",
                             [](const FunctionEvent& f) {
                               std::vector<std::string> out;
                               if (const EventDetail* d = f.detail()) {
                                 for (const RecordedValue& v : d->inputs) {
                                   out.push_back(input_type_text(v));
                                 }
                               }
                               return out;
                             })
      .def_property_readonly("concrete_inputs",
                             [](const FunctionEvent& f) {
                               std::vector<std::string> out;
                               if (const EventDetail* d = f.detail()) {
                                 for (const RecordedValue& v : d->inputs) {
                                   out.push_back(concrete_input_text(v));
                                 }
                               }
                               return out;
                             })
      .def_property_readonly("stack",
                             [](const FunctionEvent& f) { return f.view->stack(f.event()); })
      .def_property_readonly("module_hierarchy",
                             [](const FunctionEvent& f) {
                               const EventDetail* d = f.detail();
                               return d ? std::string(d->module_path) : std::string();
                             })
      .def_property_readonly("flops",
                             [](const FunctionEvent& f) {
                               const EventDetail* d = f.detail();
                               return d && d->flops >= 0 ? d->flops : 0;
                             })
      .def_property_readonly("memory_bytes",
                             [](const FunctionEvent& f) -> std::int64_t {
                               const EventDetail* d = f.detail();
                               return f.event().kind == EventKind::kMemory && d ? d->memory.bytes
                                                                                : 0;
                             })
      .def_property_readonly("node_id", [](const FunctionEvent&) { return -1; })
      .def("__eq__", [](const FunctionEvent& a,
                        const FunctionEvent& b) { return a.view == b.view && a.index == b.index; })
      .def("__hash__",
           [](const FunctionEvent& f) {
             return std::hash<const void*>()(f.view.get()) ^ static_cast<std::size_t>(f.index);
           })
      .def("__repr__", [](const FunctionEvent& f) {
        const Event& e = f.event();
        return "<FunctionEvent id=" + std::to_string(e.handle) + " name='" + std::string(e.name) +
               "' thread=" + std::to_string(f.view->result().threads()[e.thread].tid) +
               " cpu_time_total=" + std::to_string(ns_to_us(e.duration_ns())) + "us>";
      });

  // py::dynamic_attr: key_averages() (opscope/profiler_util.py) keeps the first member event
  // of each row in `_first`, as torch's average keeps its first event's tree and scope.
  py::class_<FunctionEventAvg>(m, "FunctionEventAvg", py::dynamic_attr(),
                               "The statistics of the events sharing one key.")
      .def_readonly("key", &FunctionEventAvg::key)
      .def_readonly("count", &FunctionEventAvg::count)
      .def_property_readonly(
          "cpu_time_str",
          [](const FunctionEventAvg& a) { return format_time_us(a.cpu_time_avg_ns() / 1000.0); })
      .def_property_readonly(
          "cpu_time_total_str",
          [](const FunctionEventAvg& a) { return format_time_us(ns_to_us(a.cpu_time_total_ns)); })
      .def_property_readonly("self_cpu_time_total_str",
                             [](const FunctionEventAvg& a) {
                               return format_time_us(ns_to_us(a.self_cpu_time_total_ns));
                             })
      .def_property_readonly("is_remote", [](const FunctionEventAvg& a) { return a.node_id >= 0; })
      // As torch's: the scope, CPU parent and children of the first event averaged into the
      // row (None, as in torch, for a row that no event was added to).
      .def_property_readonly("scope",
                             [](const py::object& self) { return first_member(self, "scope"); })
      .def(
          "add",
          [](py::object self, const py::object& other) -> FunctionEventAvg& {
            auto& a = self.cast<FunctionEventAvg&>();
            py::list one;
            one.append(other);
            const std::vector<FunctionEventAvg> rows = rows_of(one);  // TypeError if neither
            // As torch's add: an empty row takes its first member from what is added.
            if (a.count == 0 && first_of(self).is_none()) {
              self.attr("_first") =
                  py::isinstance<FunctionEventAvg>(other) ? first_of(other) : other;
            }
            for (const FunctionEventAvg& r : rows) a.add(r);
            return a;
          },
          py::arg("other"), py::return_value_policy::reference_internal,
          "Adds a FunctionEvent or another FunctionEventAvg to these statistics (torch's add).")
      .def(
          "__iadd__",
          [](FunctionEventAvg& a, const py::object& other) -> FunctionEventAvg& {
            return py::cast(a).attr("add")(other).cast<FunctionEventAvg&>();
          },
          py::return_value_policy::reference_internal)
      .def("_first_event", &first_of, "The first event averaged into this row, or None.")
      .def_property_readonly(
          "cpu_parent", [](const py::object& self) { return first_member(self, "cpu_parent"); })
      .def_property_readonly(
          "cpu_children", [](const py::object& self) { return first_member(self, "cpu_children"); })
      .def_property_readonly(
          "cpu_time_total", [](const FunctionEventAvg& a) { return ns_to_us(a.cpu_time_total_ns); })
      .def_property_readonly(
          "self_cpu_time_total",
          [](const FunctionEventAvg& a) { return ns_to_us(a.self_cpu_time_total_ns); })
      .def_property_readonly("cpu_time",
                             [](const FunctionEventAvg& a) { return a.cpu_time_avg_ns() / 1000.0; })
      .def_readonly("cpu_memory_usage", &FunctionEventAvg::cpu_memory_usage)
      .def_readonly("self_cpu_memory_usage", &FunctionEventAvg::self_cpu_memory_usage)
      .def_readonly("cuda_memory_usage", &FunctionEventAvg::cuda_memory_usage)
      .def_readonly("self_cuda_memory_usage", &FunctionEventAvg::self_cuda_memory_usage)
      .def_readonly("device_memory_usage", &FunctionEventAvg::cuda_memory_usage)  // torch 2.x
      .def_readonly("self_device_memory_usage", &FunctionEventAvg::self_cuda_memory_usage)
      // torch 2.x: the first member event's (False in a row no event was added to).
      .def_property_readonly("is_user_annotation",
                             [](const py::object& self) {
                               const py::object first = first_of(self);
                               return !first.is_none() &&
                                      py::getattr(first, "is_user_annotation").cast<bool>();
                             })
      .def_readonly("flops", &FunctionEventAvg::flops)
      .def_property_readonly("input_shapes",
                             [](const FunctionEventAvg& a) { return shapes_list(a.input_shapes); })
      .def_readonly("stack", &FunctionEventAvg::stack)
      .def_readonly("node_id", &FunctionEventAvg::node_id)
      .def_readonly("self_cpu_percent_total", &FunctionEventAvg::self_cpu_percent_total)
      .def_readonly("is_async", &FunctionEventAvg::is_async)
      .def("__repr__", [](const FunctionEventAvg& a) {
        return "<FunctionEventAvg key='" + a.key + "' count=" + std::to_string(a.count) +
               " cpu_time_total=" + std::to_string(ns_to_us(a.cpu_time_total_ns)) + "us>";
      });

  py::class_<KeyAverages>(m, "KeyAverages", "Events grouped by key, as key_averages() returns.")
      .def("__len__", [](const KeyAverages& k) { return k.rows().size(); })
      .def("__getitem__",
           [](const KeyAverages& k, std::int64_t i) {
             const auto n = static_cast<std::int64_t>(k.rows().size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("row index out of range");
             return k.rows()[static_cast<std::size_t>(i)];
           })
      .def("table", &table, py::arg("sort_by") = py::none(), py::arg("row_limit") = 100,
           py::arg("max_src_column_width") = 75, py::arg("max_name_column_width") = 55,
           py::arg("max_shapes_column_width") = 80, py::arg("header") = py::none(),
           py::arg("top_level_events_only") = false, py::arg("time_unit") = py::none(), Release())
      .def("__str__", [](const KeyAverages& k) {
        py::gil_scoped_release release;
        return k.table();
      });
  def_device_fields<FunctionEvent>(m, "FunctionEvent");
  {
    // torch's [self_]{cpu,cuda}_memory_usage of one event.
    auto cls = py::reinterpret_borrow<py::class_<FunctionEvent>>(m.attr("FunctionEvent"));
    struct MemoryField {
      const char* name;
      bool self;
      DeviceType device;
    };
    for (const MemoryField& field :
         {MemoryField{"cpu_memory_usage", false, DeviceType::kCPU},
          MemoryField{"self_cpu_memory_usage", true, DeviceType::kCPU},
          MemoryField{"cuda_memory_usage", false, DeviceType::kCUDA},
          MemoryField{"self_cuda_memory_usage", true, DeviceType::kCUDA},
          // torch 2.x's names for the CUDA ones.
          MemoryField{"device_memory_usage", false, DeviceType::kCUDA},
          MemoryField{"self_device_memory_usage", true, DeviceType::kCUDA}}) {
      cls.def_property_readonly(field.name, [field](const FunctionEvent& f) {
        return f.memory(field.self, field.device);
      });
    }
  }
  def_device_fields<FunctionEventAvg>(m, "FunctionEventAvg");
}

}  // namespace opscope::python
