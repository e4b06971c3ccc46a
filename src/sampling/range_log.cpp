#include "sampling/range_log.h"

#include "clock/clock.h"
#include "opscope/internal/clock.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <limits>
#include <mutex>
#include <string_view>

namespace opscope::sampling {
namespace {

constexpr std::uint64_t kOpen = std::numeric_limits<std::uint64_t>::max();

// One range as logged, in counter ticks (read in its start and end callbacks),
// turned into CLOCK_MONOTONIC ns at take(). Range names live as long as the process (call-site
// literals, or the collector's interned names), so the view is kept and copied only at take().
struct Logged {
  std::uint64_t begin_ticks;
  std::uint64_t end_ticks;
  std::string_view name;
};

// The ranges begun on one thread. The thread itself appends; the lock is uncontended except
// when a range ends on another thread or the log is taken.
struct ThreadLog {
  std::mutex mutex;
  std::int32_t tid = 0;
  std::deque<Logged> ranges;  // grows without copying what it holds
  // Ranges begun here and not ended yet, innermost last: the RecordFunction (which cannot move
  // while it runs) and its index in `ranges`.
  std::vector<std::pair<const RecordFunction*, std::size_t>> open;

  // Ends `range` if it was begun here; false if not.
  bool end(const RecordFunction* range, std::uint64_t now) {
    for (auto it = open.rbegin(); it != open.rend(); ++it) {
      if (it->first == range) {
        ranges[it->second].end_ticks = now;
        open.erase(std::next(it).base());
        return true;
      }
    }
    return false;
  }
};

std::atomic<std::uint64_t> g_next_generation{1};

}  // namespace

struct RangeLog::State {
  const std::uint64_t generation = g_next_generation.fetch_add(1);
  std::atomic<bool> open{true};
  std::mutex registry_mutex;
  std::vector<std::unique_ptr<ThreadLog>> threads;

  // The calling thread's log for this State, registered on its first range.
  ThreadLog& this_thread() {
    thread_local std::uint64_t cached_generation = 0;
    thread_local ThreadLog* cached = nullptr;
    if (cached_generation != generation) {
      auto log = std::make_unique<ThreadLog>();
      log->tid = current_tid();
      std::lock_guard lock(registry_mutex);
      threads.push_back(std::move(log));
      cached = threads.back().get();
      cached_generation = generation;
    }
    return *cached;
  }
};

std::int32_t current_tid() noexcept {
  thread_local const std::int32_t tid = static_cast<std::int32_t>(syscall(SYS_gettid));
  return tid;
}

RangeLog::RangeLog() : state_(std::make_shared<State>()) {
  // The callbacks hold the State: one may still run on another thread after take().
  std::shared_ptr<State> state = state_;
  auto start = [state](const RecordFunction& range) -> std::unique_ptr<ObserverContext> {
    ThreadLog& log = state->this_thread();
    std::lock_guard lock(log.mutex);
    if (!state->open.load(std::memory_order_relaxed)) return nullptr;
    log.open.emplace_back(&range, log.ranges.size());
    // The range reads its own start after the start callbacks: this read is a little earlier.
    log.ranges.push_back({internal::ticks(), kOpen, range.name()});
    return nullptr;
  };
  auto end = [state](const RecordFunction& range, ObserverContext*) {
    const std::uint64_t now = internal::ticks();
    {
      ThreadLog& log = state->this_thread();
      std::lock_guard lock(log.mutex);
      if (!state->open.load(std::memory_order_relaxed) || log.end(&range, now)) return;
    }
    // Ended on another thread than the one that began it (an async range): rare, so search.
    std::lock_guard registry(state->registry_mutex);
    for (const std::unique_ptr<ThreadLog>& other : state->threads) {
      std::lock_guard lock(other->mutex);
      if (other->end(&range, now)) return;
    }
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
  // Ticks to CLOCK_MONOTONIC (steady_clock): the rate over the library's lifetime, the offset
  // from an anchor read now.
  const clock::Anchor& first = clock::process_anchor();
  const clock::Anchor now = clock::take_anchor();
  const double ns_per_tick =
      now.ticks > first.ticks ? static_cast<double>(now.steady_ns - first.steady_ns) /
                                    static_cast<double>(now.ticks - first.ticks)
                              : 1.0;
  auto to_ns = [&](std::uint64_t ticks) -> std::uint64_t {
    if (ticks == kOpen) return kOpen;
    const double delta = static_cast<double>(static_cast<std::int64_t>(ticks - now.ticks));
    return static_cast<std::uint64_t>(now.steady_ns + static_cast<std::int64_t>(delta * ns_per_tick));
  };
  std::vector<SampledRange> ranges;
  std::lock_guard registry(state_->registry_mutex);
  for (const std::unique_ptr<ThreadLog>& log : state_->threads) {
    std::lock_guard lock(log->mutex);
    state_->open.store(false, std::memory_order_relaxed);
    for (const Logged& range : log->ranges) {
      ranges.push_back({log->tid, to_ns(range.begin_ticks), to_ns(range.end_ticks),
                        std::string(range.name)});
    }
    log->ranges.clear();
    log->open.clear();
  }
  state_->open.store(false, std::memory_order_relaxed);
  return ranges;
}

}  // namespace opscope::sampling
