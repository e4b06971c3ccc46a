#include "session/recorder.h"

#include <unistd.h>

#include <memory>
#include <mutex>

#include "backend/registry.h"
#include "clock/clock.h"
#include "opscope/internal/clock.h"
#include "opscope/error.h"

namespace opscope::session {
namespace {

std::mutex g_claim_mu;
const void* g_owner = nullptr;
// What holds the claim, for the error a second claimant gets. A pointer, not a std::string:
// constant-initialized, so a thread started from another file's static initializer (the
// on-demand client's autostart) cannot see it before it is constructed.
constinit const char* g_owner_what = nullptr;

}  // namespace

void Recorder::claim(const void* owner, const char* what) {
  std::lock_guard<std::mutex> lock(g_claim_mu);
  if (g_owner != nullptr && g_owner != owner) {
    // "where" is the attempt, so that a binding may name its own call in its place.
    throw Error("cannot start " + std::string(what),
                std::string(g_owner_what) +
                    " is already recording in this process, and opscope records one session "
                    "at a time; stop it first");
  }
  g_owner = owner;
  g_owner_what = what;
  collect::set_chunk_pooling(true);
}

void Recorder::release(const void* owner) noexcept {
  std::lock_guard<std::mutex> lock(g_claim_mu);
  if (g_owner == owner) {
    g_owner = nullptr;
    collect::set_chunk_pooling(false);
  }
}

void Recorder::prepare_window(const WindowOptions& options) {
  if (open_) throw Error("internal: a recording window is already open");
  prepared_ = false;
  backends_.clear();
  options_ = options;
  try {
    backends_ = backend::make_backends(options.request);
    for (const auto& b : backends_) b->prepare();
  } catch (...) {
    backends_.clear();
    throw;
  }
  prepared_ = true;
}

void Recorder::start_window(const WindowOptions& options) {
  if (open_) throw Error("internal: a recording window is already open");
  if (!prepared_) prepare_window(options);
  prepared_ = false;
  start_ticks_ = internal::ticks();
  for (std::size_t i = 0; i < backends_.size(); ++i) {
    try {
      backends_[i]->start();
    } catch (...) {
      // The window does not open: what started stops, as if it never had.
      while (i-- > 0) backends_[i]->stop();
      backends_.clear();
      throw;
    }
  }
  open_ = true;
}

std::shared_ptr<const ProfilerResult> Recorder::stop_window(
    std::vector<std::pair<std::string, std::string>> metadata) {
  if (!open_) throw Error("internal: no recording window is open");
  open_ = false;
  const std::uint64_t stop_ticks = internal::ticks();
  for (const auto& b : backends_) b->stop();

  // Calibrate over the longest span we have: from library load to now.
  const clock::TickConverter conv = clock::TickConverter::calibrate(clock::process_anchor());

  ProfilerResult::Builder builder;
  builder.set_pid(::getpid());
  builder.set_window(conv.to_wall_ns(start_ticks_), conv.to_wall_ns(stop_ticks));
  for (const auto& b : backends_) b->collect(builder, conv);
  backends_.clear();

  builder.set_lenses(options_.request.lenses);
  builder.set_trace_call_stacks(options_.trace_call_stacks);
  for (auto& [key, value] : metadata) builder.add_metadata(std::move(key), std::move(value));
  SessionStats& stats = builder.stats();
  stats.buffer_limit_bytes = options_.request.epoch.buffer_limit_bytes;
  stats.not_recorded = options_.not_recorded;
  return builder.finish();
}

}  // namespace opscope::session
