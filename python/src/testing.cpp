// Native workloads the Python tests drive: ranges recorded by threads that C++ code starts,
// as an extension's worker pool would.
#include <pybind11/stl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bindings.h"
#include "common.h"
#include "opscope/record_function.h"

namespace opscope::python {

void bind_testing(py::module_& m) {
  m.def(
      "_run_native_threads",
      [](int threads, const std::string& outer, const std::string& inner, int inner_count) {
        std::vector<std::uint64_t> tids(static_cast<std::size_t>(threads));
        {
          py::gil_scoped_release release;
          std::vector<std::thread> pool;
          for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
              tids[static_cast<std::size_t>(t)] = static_cast<std::uint64_t>(::syscall(SYS_gettid));
              RecordFunction range(outer, RecordScope::kUserScope);
              for (int i = 0; i < inner_count; ++i) {
                RecordFunction child(inner, RecordScope::kFunction);
              }
            });
          }
          for (std::thread& th : pool) th.join();
        }
        return tids;
      },
      py::arg("threads"), py::arg("outer"), py::arg("inner"), py::arg("inner_count"),
      "Starts `threads` C++ threads; each records a range `outer` holding `inner_count` "
      "ranges `inner`, then exits. Returns the threads' OS ids.");
}

}  // namespace opscope::python
