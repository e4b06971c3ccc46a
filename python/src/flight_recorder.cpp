// The flight recorder for Python: _C.FlightRecorder (what opscope.profiler.flight_recorder
// drives) and the process-wide calls (dump_flight_recorder, flight_dump_path,
// decode_flight_dump), over opscope/flight_recorder.h.
//
// The GIL: starting, stopping, dumping, decoding and a step that may dump run with the GIL
// released. A dump copies and writes the ring (64 MiB by default), which takes a while, and
// Python threads keep recording meanwhile; a thread that holds the GIL while it waits for the
// recorder (stop() waits for a dump under way) must not block the dumping thread, which never
// needs the GIL. The recorder's own lock is taken after the GIL is released, never before.
//
// Nothing here assumes the process's recorder was started from Python: the process-wide calls
// dump whichever recorder records (OPSCOPE_FLIGHT_RECORDER starts one at load, C++ code may
// start another), and the Python allocation hooks follow the recording lenses at import as well
// as at each start and stop of a recorder made here.
#include "opscope/flight_recorder.h"

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>

#include "bindings.h"
#include "common.h"
#include "python_memory.h"

namespace opscope::python {
namespace {

// What a dump wrote, as Python's FlightDump(path, events, open_ranges) is built from.
using DumpTuple = std::tuple<std::string, std::uint64_t, std::uint64_t>;

DumpTuple to_tuple(const FlightDump& d) { return {d.path, d.events, d.open_ranges}; }

// A recorder made from Python. `recorder` is null once stopped; the lock keeps stop() from
// freeing the recorder under a dump of it (dumps share it, stop takes it alone).
struct PyFlightRecorder {
  std::shared_mutex mu;
  std::unique_ptr<FlightRecorder> recorder;
  bool slow_step = false;  // whether step() may dump (and so must release the GIL)
};

// Brings Python's allocator wrappers in line with the recording lenses when it goes out of
// scope, with the GIL held (declared before the GIL is released): a recorder with
// profile_memory records the interpreter's allocations as a window with it does.
struct SyncMemoryHooks {
  SyncMemoryHooks() = default;
  SyncMemoryHooks(const SyncMemoryHooks&) = delete;
  SyncMemoryHooks& operator=(const SyncMemoryHooks&) = delete;
  ~SyncMemoryHooks() { sync_python_memory_hooks(); }
};

std::unique_ptr<PyFlightRecorder> make_recorder(double keep, std::uint64_t max_bytes,
                                                bool record_shapes, bool profile_memory,
                                                bool with_stack, bool with_flops, bool with_modules,
                                                double slow_step_factor, int slow_step_window,
                                                double slow_step_min_interval,
                                                const std::string& dump_dir, bool dump_on_crash) {
  FlightRecorderOptions options;
  options.keep_seconds = keep;
  options.max_bytes = max_bytes;
  options.lenses.record_shapes = record_shapes;
  options.lenses.profile_memory = profile_memory;
  options.lenses.with_stack = with_stack;
  options.lenses.with_flops = with_flops;
  options.lenses.with_modules = with_modules;
  options.slow_step_factor = slow_step_factor;
  options.slow_step_window = slow_step_window;
  options.slow_step_min_interval_seconds = slow_step_min_interval;
  options.dump_dir = dump_dir;
  options.dump_on_crash = dump_on_crash;
  auto p = std::make_unique<PyFlightRecorder>();
  p->slow_step = slow_step_factor != 0;
  const SyncMemoryHooks sync;
  py::gil_scoped_release release;
  // Maps the ring and, with dump_on_crash, opens the crash file: no Python, and it may block.
  p->recorder =
      in_call("flight_recorder()", [&] { return std::make_unique<FlightRecorder>(options); });
  return p;
}

Error stopped(const char* call) {
  return Error(call,
               "this flight recorder was stopped; start another with flight_recorder(), or "
               "dump the process's recorder, whoever started it, with dump_flight_recorder()");
}

}  // namespace

void bind_flight_recorder(py::module_& m) {
  // A recorder started before this module loaded (OPSCOPE_FLIGHT_RECORDER) with profile_memory
  // records the interpreter's allocations too.
  sync_python_memory_hooks();

  py::class_<PyFlightRecorder>(m, "FlightRecorder",
                               "The native flight recorder behind "
                               "opscope.profiler.flight_recorder.")
      .def(py::init(&make_recorder), py::kw_only(), py::arg("keep"), py::arg("max_bytes"),
           py::arg("record_shapes"), py::arg("profile_memory"), py::arg("with_stack"),
           py::arg("with_flops"), py::arg("with_modules"), py::arg("slow_step_factor"),
           py::arg("slow_step_window"), py::arg("slow_step_min_interval"), py::arg("dump_dir"),
           py::arg("dump_on_crash"))
      .def(
          "dump",
          [](PyFlightRecorder& p, const std::string& path, const std::string& call) {
            py::gil_scoped_release release;
            std::shared_lock<std::shared_mutex> lock(p.mu);
            if (!p.recorder) throw stopped(call.c_str());
            return to_tuple(in_call(call.c_str(), [&] { return p.recorder->dump(path); }));
          },
          py::arg("path"), py::arg("call") = "flight_recorder.dump()",
          "Writes the ring to `path` while recording goes on: (path, events, open_ranges).")
      .def(
          "step",
          [](PyFlightRecorder& p) {
            if (!p.slow_step) return;        // nothing to time: no lock, no GIL release
            py::gil_scoped_release release;  // a slow step dumps
            std::shared_lock<std::shared_mutex> lock(p.mu);
            if (!p.recorder) throw stopped("flight_recorder.step()");
            p.recorder->step();
          },
          "Marks the end of a step, for the slow-step trigger.")
      .def(
          "stop",
          [](PyFlightRecorder& p) {
            const SyncMemoryHooks sync;
            py::gil_scoped_release release;
            std::unique_lock<std::shared_mutex> lock(p.mu);  // waits for a dump under way
            p.recorder.reset();
          },
          "Stops recording and frees the ring (nothing when stopped already).")
      .def_property_readonly("running", [](PyFlightRecorder& p) {
        py::gil_scoped_release release;
        std::shared_lock<std::shared_mutex> lock(p.mu);
        return p.recorder != nullptr;
      });

  m.def("flight_recorder_running", &flight_recorder_running,
        "Whether a flight recorder records in this process, whoever started it.");
  m.def(
      "dump_flight_recorder",
      [](const std::string& path, const std::string& trigger, const std::string& call) {
        py::gil_scoped_release release;
        return to_tuple(in_call(call.c_str(), [&] { return dump_flight_recorder(path, trigger); }));
      },
      py::arg("path"), py::arg("trigger"), py::arg("call") = "dump_flight_recorder()",
      "Dumps the process's flight recorder, with `trigger` in the metadata: (path, events, "
      "open_ranges). RuntimeError when none records.");
  m.def("flight_dump_path", &flight_dump_path, py::arg("trigger"),
        "A fresh path in the running recorder's dump_dir for a dump of `trigger`.");
  m.def(
      "decode_flight_dump",
      [](const std::string& raw_path, const std::string& out_path) {
        py::gil_scoped_release release;
        return to_tuple(in_call("decode_flight_dump()",
                                [&] { return decode_flight_dump(raw_path, out_path); }));
      },
      py::arg("raw_path"), py::arg("out_path"),
      "Turns a crash's raw dump into a trace at out_path: (path, events, open_ranges).");
}

}  // namespace opscope::python
