// ProfilerResult::Builder: turns a bag of events into the ordered, nested result that
// analysis and export read.
#include <algorithm>
#include <numeric>

#include "opscope/result.h"

namespace opscope {

ProfilerResult::Builder::Builder() : result_(std::make_shared<ProfilerResult>()) {}

std::int32_t ProfilerResult::Builder::add_thread(ThreadInfo info) {
  result_->threads_.push_back(std::move(info));
  return static_cast<std::int32_t>(result_->threads_.size() - 1);
}

std::string_view ProfilerResult::Builder::keep(std::string_view name) {
  return result_->names_.emplace_back(name);
}

void ProfilerResult::Builder::add_event(const Event& event) { result_->events_.push_back(event); }

void ProfilerResult::Builder::reserve(std::size_t events) { result_->events_.reserve(events); }

std::int32_t ProfilerResult::Builder::add_detail(EventDetail detail) {
  result_->details_.push_back(std::move(detail));
  return static_cast<std::int32_t>(result_->details_.size() - 1);
}

std::int32_t ProfilerResult::Builder::add_stack(std::vector<StackFrame> frames) {
  result_->stacks_.push_back(std::move(frames));
  return static_cast<std::int32_t>(result_->stacks_.size() - 1);
}

void ProfilerResult::Builder::set_lenses(const LensSet& lenses) { result_->lenses_ = lenses; }
void ProfilerResult::Builder::set_trace_call_stacks(bool on) { result_->trace_call_stacks_ = on; }

void ProfilerResult::Builder::add_metadata(std::string key, std::string json_value) {
  result_->metadata_.emplace_back(std::move(key), std::move(json_value));
}

void ProfilerResult::Builder::set_window(std::int64_t start_ns, std::int64_t end_ns) {
  result_->start_time_ns_ = start_ns;
  result_->end_time_ns_ = end_ns;
}

void ProfilerResult::Builder::set_pid(std::int64_t pid) { result_->pid_ = pid; }

SessionStats& ProfilerResult::Builder::stats() { return result_->stats_; }

std::shared_ptr<const ProfilerResult> ProfilerResult::Builder::finish() {
  std::vector<Event>& events = result_->events_;
  // Order: thread, start ascending, longer first on equal starts (so an enclosing event comes
  // before what it holds), then by handle for a stable order among identical spans.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
    return a.handle < b.handle;
  });

  // Nesting per thread with a stack of open events. Async ranges and instants neither hold
  // nor join the nesting: async ranges overlap freely by nature.
  std::vector<std::int32_t> open;
  std::vector<std::int32_t> last_child;  // per open depth: last child linked, for siblings
  std::int32_t current_thread = -1;
  for (std::size_t i = 0; i < events.size(); ++i) {
    Event& e = events[i];
    e.parent = e.first_child = e.next_sibling = -1;
    e.self_ns = e.duration_ns();
    if (e.thread != current_thread) {
      open.clear();
      last_child.clear();
      current_thread = e.thread;
    }
    if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory) {
      // Owned by the innermost range still open at this time; not linked as a child.
      while (!open.empty() && events[static_cast<std::size_t>(open.back())].end_ns < e.start_ns) {
        open.pop_back();
        last_child.pop_back();
      }
      if (!open.empty()) e.parent = open.back();
      continue;
    }
    if (e.kind != EventKind::kRange) continue;
    // Close what ended before this one starts; a range that is not contained in the one on
    // top (ended out of order) also closes it, so nesting stays a tree.
    while (!open.empty() && events[static_cast<std::size_t>(open.back())].end_ns < e.end_ns) {
      open.pop_back();
      last_child.pop_back();
    }
    while (!open.empty() && events[static_cast<std::size_t>(open.back())].end_ns <= e.start_ns &&
           e.duration_ns() > 0) {
      open.pop_back();
      last_child.pop_back();
    }
    const auto self = static_cast<std::int32_t>(i);
    if (!open.empty()) {
      const std::int32_t parent = open.back();
      Event& p = events[static_cast<std::size_t>(parent)];
      e.parent = parent;
      p.self_ns -= e.duration_ns();
      if (last_child.back() < 0) {
        p.first_child = self;
      } else {
        events[static_cast<std::size_t>(last_child.back())].next_sibling = self;
      }
      last_child.back() = self;
    }
    open.push_back(self);
    last_child.push_back(-1);
  }
  for (Event& e : events) e.self_ns = std::max<std::int64_t>(e.self_ns, 0);
  result_->stats_.events_recorded = events.size();

  std::shared_ptr<const ProfilerResult> out = std::move(result_);
  result_ = std::make_shared<ProfilerResult>();
  return out;
}

}  // namespace opscope
