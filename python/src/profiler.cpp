// The session layer for Python: Profiler, schedules, activities, ExperimentalConfig and the
// ExecutionTraceObserver. opscope.profiler.profile drives _C.Profiler; the transition table,
// the ProfilerStep#N ranges and the warnings are the C++ Profiler's own.
//
// The GIL: every Profiler method runs with the GIL released (stopping and exporting may take
// a while, and other Python threads keep recording meanwhile), and takes the profiler's own
// mutex after releasing it. The Python callables a Profiler calls back (a Python schedule,
// on_trace_ready) take the GIL again for the call. Releasing before locking is what keeps a
// callback that needs the GIL from deadlocking against a thread that holds the GIL and waits
// for the mutex; the mutex is recursive so that on_trace_ready may call the profiler back
// (export_chrome_trace, key_averages).
#include "opscope/profiler.h"

#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "common.h"
#include "py_compat.h"
#include "opscope/execution_trace.h"
#include "opscope/extension.h"
#include "opscope/legacy.h"
#include "opscope/schedule.h"
#include "python_memory.h"
#include "python_stacks.h"
#include "results.h"

namespace opscope::python {

namespace {

using Release = py::call_guard<py::gil_scoped_release>;

// A schedule made in C++ (opscope.profiler.schedule()): a Profiler given one steps without
// touching Python.
struct NativeSchedule {
  Schedule fn;
};

// The action a Python schedule returned: an opscope.profiler.ProfilerAction (an Enum, read
// through .value) or its integer value.
ProfilerAction to_action(const py::object& returned) {
  py::object value = py::hasattr(returned, "value") ? returned.attr("value") : returned;
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    throw py::type_error("schedule must return a ProfilerAction, got " +
                         std::string(py::repr(returned)));
  }
  const long action = value.cast<long>();
  if (action < 0 || action > static_cast<long>(ProfilerAction::kRecordAndSave)) {
    throw py::value_error("schedule returned " + std::string(py::repr(returned)) +
                          ", which is not a ProfilerAction (NONE=0, WARMUP=1, RECORD=2, "
                          "RECORD_AND_SAVE=3)");
  }
  return static_cast<ProfilerAction>(action);
}

Schedule to_schedule(const py::object& schedule) {
  if (schedule.is_none()) return {};  // record every step, and no ProfilerStep ranges
  if (py::isinstance<NativeSchedule>(schedule)) return schedule.cast<const NativeSchedule&>().fn;
  if (!PyCallable_Check(schedule.ptr())) {
    throw py::type_error("schedule must be a callable taking the step number, got " +
                         std::string(py::repr(schedule)));
  }
  auto fn = std::make_shared<PyRef>(schedule);
  return [fn](std::int64_t step) {
    py::gil_scoped_acquire gil;
    return to_action(fn->get()(step));
  };
}

// The native profiler and the lock its methods take (see the top of this file).
struct PyProfiler {
  explicit PyProfiler(ProfilerConfig config)
      : with_stack(config.lenses.with_stack), profiler(std::move(config)) {}
  bool with_stack;
  Profiler profiler;
  std::recursive_mutex mutex;
};

using Lock = std::lock_guard<std::recursive_mutex>;

// Brings Python's allocator wrappers in line with the recording window when it goes out of
// scope, with the GIL held (declared before the GIL is released).
struct SyncMemoryHooks {
  SyncMemoryHooks() = default;
  SyncMemoryHooks(const SyncMemoryHooks&) = delete;
  SyncMemoryHooks& operator=(const SyncMemoryHooks&) = delete;
  ~SyncMemoryHooks() { sync_python_memory_hooks(); }
};

// Runs start(), step() or stop() of `p` without the GIL (it may stop a window, export,
// call on_trace_ready, which takes the GIL back). The step range it begins takes the caller's
// Python frames, captured before the GIL is released; afterwards, even when it threw, Python's
// allocator wrappers follow the window that may have begun or ended.
// `name` is the Python call ("profile.start()") its errors name.
void transition(PyProfiler& p, void (Profiler::*call)(), const char* name) {
  // The thread that drives the session gets its `threading` name while the GIL is held: with
  // profile_memory its first record may be an allocation, where the name hook cannot run.
  extension::name_this_thread();
  const SyncMemoryHooks sync;
  const PythonStackSnapshot frames(p.with_stack);
  py::gil_scoped_release release;
  Lock lock(p.mutex);
  in_call(name, [&] { (p.profiler.*call)(); });
}

std::unique_ptr<PyProfiler> make_profiler(std::vector<ActivityType> activities,
                                          const py::object& schedule,
                                          const py::object& on_trace_ready, bool record_shapes,
                                          bool profile_memory, bool with_stack, bool with_flops,
                                          bool with_modules,
                                          std::optional<ExperimentalConfig> experimental,
                                          const py::object& execution_trace_observer) {
  ProfilerConfig config;
  config.name = "an opscope.profiler.profile";
  config.activities = std::move(activities);
  config.schedule = to_schedule(schedule);
  if (!on_trace_ready.is_none()) {
    if (!PyCallable_Check(on_trace_ready.ptr())) {
      throw py::type_error("on_trace_ready must be callable, got " +
                           std::string(py::repr(on_trace_ready)));
    }
    // Called with no arguments: the Python side binds the profile object it should receive.
    auto fn = std::make_shared<PyRef>(on_trace_ready);
    config.on_trace_ready = [fn](Profiler&) {
      py::gil_scoped_acquire gil;
      fn->get()();
    };
  }
  config.lenses.record_shapes = record_shapes;
  config.lenses.profile_memory = profile_memory;
  config.lenses.with_stack = with_stack;
  config.lenses.with_flops = with_flops;
  config.lenses.with_modules = with_modules;
  if (experimental) config.experimental = *experimental;
  if (!execution_trace_observer.is_none()) {
    if (!py::isinstance<ExecutionTraceObserver>(execution_trace_observer)) {
      throw py::type_error(
          "execution_trace_observer must be an opscope ExecutionTraceObserver, got " +
          std::string(py::repr(execution_trace_observer)));
    }
    config.execution_trace_observer =
        execution_trace_observer.cast<std::shared_ptr<ExecutionTraceObserver>>();
  }
  return std::make_unique<PyProfiler>(std::move(config));
}

py::dict stats_dict(const SessionStats& s) {
  py::dict d;
  d["events_recorded"] = s.events_recorded;
  d["events_dropped"] = s.events_dropped;
  d["ranges_open_at_stop"] = s.ranges_open_at_stop;
  d["gpu_records_discarded"] = s.gpu_records_discarded;
  d["buffer_bytes"] = s.buffer_bytes;
  d["buffer_limit_bytes"] = s.buffer_limit_bytes;
  d["not_recorded"] = s.not_recorded;
  return d;
}

// The collector's thread name hook: a thread that registers while holding the GIL (a Python
// thread's first range) is named by `threading`, as Python code knows it ("MainThread",
// "loader-0"), instead of the OS name every Python thread shares ("python3"). Threads without
// the GIL (C++ threads) keep their OS name: taking the GIL here could deadlock.
bool threading_name(std::string* name) {
  if (!Py_IsInitialized() || interpreter_finalizing() || !PyGILState_Check()) return false;
  py::error_scope pending;  // keep any exception the thread had pending
  try {
    const py::object thread = py::module_::import("threading").attr("current_thread")();
    *name = thread.attr("name").cast<std::string>();
    return true;
  } catch (const py::error_already_set&) {
    return false;
  }
}

}  // namespace

void bind_profiler(py::module_& m) {
  extension::set_thread_name_hook(&threading_name);
  // Once the interpreter shuts down, threads that register keep their OS names.
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { extension::set_thread_name_hook(nullptr); }));

  py::enum_<ActivityType>(m, "ProfilerActivity", "What a profiling session records.")
      .value("CPU", ActivityType::kCPU)
      .value("CUDA", ActivityType::kCUDA);

  m.def("supported_activities", &supported_activities,
        "The activities this build and machine can record (CPU; CUDA where CUPTI records it).");
  m.def("activity_unavailable_reason", &activity_unavailable_reason, py::arg("activity"),
        "Why the activity cannot be recorded here (no driver, no device, no CUPTI, ...); '' when "
        "it can be.");
  m.def("cuda_event_timing_unavailable_reason", &cuda_event_timing_unavailable_reason,
        "Why ranges cannot be timed with CUDA events here (ExperimentalConfig.cuda_event_timing); "
        "'' when they can be.");

  m.def(
      "set_distributed_info",
      [](const std::string& json) { value_errors([&] { set_distributed_info(json); }); },
      py::arg("json"),
      "States the process's distributed setup (a JSON object); added to every window's "
      "metadata as \"distributedInfo\". An empty string clears it.");
  m.def("distributed_info", &distributed_info);

  py::class_<NativeSchedule>(m, "Schedule", "A schedule built by opscope.profiler.schedule().")
      .def(
          "__call__",
          [](const NativeSchedule& s, std::int64_t step) {
            return static_cast<int>(value_errors([&] { return s.fn(step); }));
          },
          py::arg("step"), "The action (an int, ProfilerAction's value) at `step`.");
  m.def(
      "schedule",
      [](std::int64_t wait, std::int64_t warmup, std::int64_t active, std::int64_t repeat,
         std::int64_t skip_first) {
        return NativeSchedule{value_errors([&] {
          return schedule({.wait = wait,
                           .warmup = warmup,
                           .active = active,
                           .repeat = repeat,
                           .skip_first = skip_first});
        })};
      },
      py::kw_only(), py::arg("wait"), py::arg("warmup"), py::arg("active"), py::arg("repeat") = 0,
      py::arg("skip_first") = 0);
  m.def("default_schedule", [] { return NativeSchedule{default_schedule()}; });

  // opscope.autograd.profiler.emit_nvtx: the legacy profiler's NVTX mode on this thread.
  m.def(
      "_enable_nvtx",
      [](bool record_shapes) {
        enable_profiler_legacy(
            {.state = LegacyProfilerState::kNVTX, .lenses = {.record_shapes = record_shapes}});
      },
      py::arg("record_shapes") = false,
      "Forwards every range to NVTX until _disable_nvtx(). RuntimeError, naming the reason, "
      "without a CUDA device.");
  m.def("_disable_nvtx", [] { disable_profiler_legacy({.consolidate = false}); });
  m.def("_python_memory_hooked", &python_memory_hooked,
        "Whether opscope wraps Python's allocators now (while a window records memory).");

  py::class_<ExperimentalConfig>(
      m, "ExperimentalConfig",
      "torch's _ExperimentalConfig (profiler_metrics, profiler_measure_per_kernel, verbose) "
      "and opscope's own options (buffer limit, thread scope).")
      .def(py::init([](const std::vector<std::string>& profiler_metrics,
                       bool profiler_measure_per_kernel, bool verbose,
                       std::uint64_t buffer_limit_bytes, bool record_all_threads,
                       bool cuda_event_timing) {
             if (!profiler_metrics.empty() || profiler_measure_per_kernel) {
               warn(
                   "ExperimentalConfig: profiler_metrics and profiler_measure_per_kernel "
                   "select CUPTI profiler metrics, which this build does not record; ignored");
             }
             return ExperimentalConfig{.buffer_limit_bytes = buffer_limit_bytes,
                                       .record_all_threads = record_all_threads,
                                       .verbose = verbose,
                                       .cuda_event_timing = cuda_event_timing};
           }),
           py::arg("profiler_metrics") = std::vector<std::string>{},
           py::arg("profiler_measure_per_kernel") = false, py::arg("verbose") = true, py::kw_only(),
           py::arg("buffer_limit_bytes") = ExperimentalConfig{}.buffer_limit_bytes,
           py::arg("record_all_threads") = true, py::arg("cuda_event_timing") = false)
      .def_readwrite("buffer_limit_bytes", &ExperimentalConfig::buffer_limit_bytes)
      .def_readwrite("record_all_threads", &ExperimentalConfig::record_all_threads)
      .def_readwrite("verbose", &ExperimentalConfig::verbose)
      .def_readwrite("cuda_event_timing", &ExperimentalConfig::cuda_event_timing)
      .def("__repr__", [](const ExperimentalConfig& c) {
        return "ExperimentalConfig(verbose=" + std::string(c.verbose ? "True" : "False") +
               ", buffer_limit_bytes=" + std::to_string(c.buffer_limit_bytes) +
               ", record_all_threads=" + (c.record_all_threads ? "True" : "False") + ")";
      });

  py::class_<ExecutionTraceObserver, std::shared_ptr<ExecutionTraceObserver>>(
      m, "ExecutionTraceObserver")
      .def(py::init<>())
      .def(
          "register_callback",
          [](py::object self, const std::string& path) {
            self.cast<ExecutionTraceObserver&>().register_callback(path);
            return self;
          },
          py::arg("output_file_path"))
      .def("unregister_callback", &ExecutionTraceObserver::unregister_callback, Release())
      .def("start", &ExecutionTraceObserver::start)
      .def("stop", &ExecutionTraceObserver::stop)
      .def("cleanup", &ExecutionTraceObserver::cleanup, Release())
      .def("is_registered", &ExecutionTraceObserver::is_registered)
      .def("is_running", &ExecutionTraceObserver::is_running)
      .def("get_output_file_path", &ExecutionTraceObserver::get_output_file_path);

  py::class_<PyProfiler>(m, "Profiler", "The native profiler behind opscope.profiler.profile.")
      .def(py::init(&make_profiler), py::arg("activities"), py::arg("schedule") = py::none(),
           py::arg("on_trace_ready") = py::none(), py::arg("record_shapes") = false,
           py::arg("profile_memory") = false, py::arg("with_stack") = false,
           py::arg("with_flops") = false, py::arg("with_modules") = false,
           py::arg("experimental_config") = py::none(),
           py::arg("execution_trace_observer") = py::none())
      .def("start", [](PyProfiler& p) { transition(p, &Profiler::start, "profile.start()"); })
      .def("stop", [](PyProfiler& p) { transition(p, &Profiler::stop, "profile.stop()"); })
      .def("step", [](PyProfiler& p) { transition(p, &Profiler::step, "profile.step()"); })
      .def_property_readonly("step_num",
                             [](PyProfiler& p) {
                               py::gil_scoped_release release;
                               Lock lock(p.mutex);
                               return p.profiler.step_num();
                             })
      .def_property_readonly("current_action",
                             [](PyProfiler& p) {
                               py::gil_scoped_release release;
                               Lock lock(p.mutex);
                               return static_cast<int>(p.profiler.current_action());
                             })
      .def_property_readonly("is_started",
                             [](PyProfiler& p) {
                               py::gil_scoped_release release;
                               Lock lock(p.mutex);
                               return p.profiler.is_started();
                             })
      .def(
          "result",
          [](PyProfiler& p, const std::string& call) {
            Lock lock(p.mutex);
            return std::make_shared<ResultView>(
                in_call(call.c_str(), [&] { return p.profiler.shared_result(); }));
          },
          py::arg("call") = "profile.events()", Release(),
          "The last finished window (RuntimeError when none has finished, naming `call`, the "
          "Python call that asked).")
      .def(
          "has_result",
          [](PyProfiler& p) {
            Lock lock(p.mutex);
            try {
              p.profiler.shared_result();
              return true;
            } catch (const Error&) {
              return false;
            }
          },
          Release())
      .def(
          "add_metadata",
          [](PyProfiler& p, const std::string& key, const std::string& value) {
            Lock lock(p.mutex);
            p.profiler.add_metadata(key, value);
          },
          py::arg("key"), py::arg("value"), Release())
      .def(
          "add_metadata_json",
          [](PyProfiler& p, const std::string& key, const std::string& json) {
            Lock lock(p.mutex);
            value_errors([&] { p.profiler.add_metadata_json(key, json); });
          },
          py::arg("key"), py::arg("value"), Release())
      .def(
          "preset_metadata_json",
          [](PyProfiler& p, const std::string& key, const std::string& json) {
            Lock lock(p.mutex);
            value_errors([&] { p.profiler.preset_metadata_json(key, json); });
          },
          py::arg("key"), py::arg("value"), Release())
      .def("stats", [](PyProfiler& p) {
        SessionStats s;
        {
          py::gil_scoped_release release;
          Lock lock(p.mutex);
          s = p.profiler.stats();
        }
        return stats_dict(s);
      });
}

}  // namespace opscope::python
