// tensorboard_trace_handler: TensorBoard's profiler plugin finds traces by file name.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/profiler.h"

namespace opscope {

std::function<void(Profiler&)> tensorboard_trace_handler(std::string dir_name,
                                                         std::string worker_name,
                                                         bool use_gzip) {
  if (dir_name.empty()) {
    throw Error("tensorboard_trace_handler: dir_name is empty; give the log directory to write to");
  }
  return [dir_name = std::move(dir_name), worker_name = std::move(worker_name),
          use_gzip](Profiler& prof) mutable {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir_name, ec)) {
      std::filesystem::create_directories(dir_name, ec);
      if (ec) {
        throw Error("Can't create directory: " + dir_name + " (" + ec.message() + ")");
      }
    }
    if (worker_name.empty()) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
      worker_name = std::string(host) + "_" + std::to_string(::getpid());
    }
    const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    std::string file = worker_name + "." + std::to_string(now_ns) + ".pt.trace.json";
    if (use_gzip) file += ".gz";
    // Through the format table, by the name's suffix: .pt.trace.json[.gz] is Chrome's.
    export_trace(prof.result(), (std::filesystem::path(dir_name) / file).string());
  };
}

}  // namespace opscope
