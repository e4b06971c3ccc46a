#include "sampling/range_log.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <limits>
#include <mutex>

namespace opscope::sampling {

struct RangeLog::State {
  std::mutex mutex;
  bool open = true;
  std::vector<SampledRange> ranges;
};

namespace {

// Handed from a range's start callback to its end callback, possibly on another thread.
struct Entry final : ObserverContext {
  std::shared_ptr<RangeLog::State> state;
  std::size_t index = 0;
};

}  // namespace

std::int32_t current_tid() noexcept {
  thread_local const std::int32_t tid = static_cast<std::int32_t>(syscall(SYS_gettid));
  return tid;
}

std::uint64_t monotonic_ns() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(now.tv_nsec);
}

RangeLog::RangeLog() : state_(std::make_shared<State>()) {
  std::shared_ptr<State> state = state_;
  auto start = [state](const RecordFunction& range) -> std::unique_ptr<ObserverContext> {
    const std::uint64_t now = monotonic_ns();
    auto entry = std::make_unique<Entry>();
    std::lock_guard lock(state->mutex);
    if (!state->open) return nullptr;
    entry->state = state;
    entry->index = state->ranges.size();
    state->ranges.push_back({current_tid(), now, std::numeric_limits<std::uint64_t>::max(),
                             std::string(range.name())});
    return entry;
  };
  auto end = [](const RecordFunction&, ObserverContext* context) {
    if (context == nullptr) return;
    const std::uint64_t now = monotonic_ns();
    auto* entry = static_cast<Entry*>(context);
    std::lock_guard lock(entry->state->mutex);
    if (entry->state->open) entry->state->ranges[entry->index].end_ns = now;
  };
  handle_ = add_global_callback(RecordFunctionCallback(start, end));
}

RangeLog::~RangeLog() {
  if (handle_ != 0) remove_callback(handle_);
}

std::vector<SampledRange> RangeLog::take() {
  if (handle_ != 0) {
    remove_callback(handle_);
    handle_ = 0;
  }
  std::lock_guard lock(state_->mutex);
  state_->open = false;
  return std::move(state_->ranges);
}

}  // namespace opscope::sampling
