// read_trace() and read_traces() (opscope/trace_reader.h): a trace file, or the ranks of a job
// in parallel, read by the importer its first bytes name (importer.h).

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "import/importer.h"
#include "import/trace_text.h"
#include "opscope/result.h"
#include "opscope/trace_reader.h"
#include "util/thread_start.h"

namespace opscope {

namespace {

// read_trace(), with a second core (`spare_core`) or not: read_traces() gives one to a trace
// only when there are fewer traces than threads. With it, a gzip text is inflated on a thread
// of its own, or the pieces of a plain text of 1 MiB or more parsed on two threads.
std::shared_ptr<const ProfilerResult> read_trace(const std::string& path, bool spare_core,
                                                 const TraceReadOptions& options) {
  try {
    const std::string head = import::read_text_head(path, import::kHeadBytes);
    ProfilerResult::Builder builder;
    import::importer_for(head).read(import::TraceText{path, head, spare_core}, builder, options);
    return builder.finish();
  } catch (const std::bad_alloc&) {
    import::fail_out_of_memory(path);
  } catch (const std::length_error&) {
    import::fail_out_of_memory(path);
  }
}

}  // namespace

std::string import::non_trace_kind(const std::string& path) {
  const Importer& importer = importer_for(read_text_head(path, kHeadBytes));
  // The Kineto row takes every text no other row knows, including one that is no trace at all.
  return importer.read == read_kineto ? std::string() : std::string(importer.name);
}

std::shared_ptr<const ProfilerResult> read_trace(const std::string& path) {
  return read_trace(path, std::thread::hardware_concurrency() > 1, {});
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
        out[i] = read_trace(paths[i], spare_core, options);
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
