// read_trace() and read_traces() (opscope/trace_reader.h): a trace file, or the ranks of a job
// in parallel, read by the importer its first bytes name (importer.h).
#include "import/read_trace.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "import/importer.h"
#include "import/trace_text.h"
#include "opscope/result.h"
#include "opscope/trace_reader.h"
#include "util/thread_start.h"

namespace opscope {

namespace import {

std::shared_ptr<const ProfilerResult> read_trace(const std::string& path, bool spare_core,
                                                 const TraceReadOptions& options) {
  const std::string head = read_text_head(path, kHeadBytes);
  ProfilerResult::Builder builder;
  importer_for(head).read(TraceText{path, head, spare_core}, builder, options);
  return builder.finish();
}

}  // namespace import

std::shared_ptr<const ProfilerResult> read_trace(const std::string& path) {
  return import::read_trace(path, std::thread::hardware_concurrency() > 1);
}

std::vector<std::shared_ptr<const ProfilerResult>> read_traces(std::span<const std::string> paths,
                                                               unsigned threads,
                                                               const TraceReadOptions& options) {
  std::vector<std::shared_ptr<const ProfilerResult>> out(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // With more threads than traces, a gzip trace is inflated beside its reading.
  const bool spare_core = threads > paths.size();
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, paths.size()));
  // Each worker takes the next unread path: ranks differ in size, so a fixed split would
  // leave cores idle behind the largest.
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < paths.size(); i = next++) {
      try {
        out[i] = import::read_trace(paths[i], spare_core, options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.push_back(util::start_thread_beside(work));
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

}  // namespace opscope
