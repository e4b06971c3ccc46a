// ProfilerResult::Builder: turns a bag of events into the ordered, nested result that
// analysis and export read.
#include "opscope/result.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "opscope/error.h"
#include "util/fresh_memory.h"
#include "util/wide_sums.h"

namespace opscope {

ProfilerResult::Builder::Builder() : result_(std::make_shared<ProfilerResult>()) {}

std::int32_t ProfilerResult::Builder::add_thread(ThreadInfo info) {
  result_->threads_.push_back(std::move(info));
  return static_cast<std::int32_t>(result_->threads_.size() - 1);
}

std::int32_t ProfilerResult::Builder::find_thread(std::uint64_t tid, std::int64_t pid) const {
  const std::vector<ThreadInfo>& threads = result_->threads_;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (threads[i].tid == tid && threads[i].pid == pid && threads[i].stream < 0) {
      return static_cast<std::int32_t>(i);
    }
  }
  return -1;
}

// Event::other_args took the padding at its end; a field more makes every recorded and
// imported event bigger (stop() writes 104 bytes an event: bench/RESULTS.md).
static_assert(sizeof(void*) != 8 || sizeof(Event) == 104, "Event grew");

std::string_view ProfilerResult::Builder::keep(std::string_view name) {
  return result_->names_.emplace_back(name);
}

std::string_view ProfilerResult::Builder::keep_text(std::string_view text) {
  if (text.empty()) return {};
  ProfilerResult& r = *result_;
  if (text.size() > r.text_left_) {
    // A block holds many texts; one longer than a block gets a block of its own.
    constexpr std::size_t kBlock = std::size_t{1} << 20;
    const std::size_t size = std::max(kBlock, text.size());
    r.text_blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    r.text_tail_ = r.text_blocks_.back().get();
    r.text_left_ = size;
  }
  std::memcpy(r.text_tail_, text.data(), text.size());
  const std::string_view kept(r.text_tail_, text.size());
  r.text_tail_ += text.size();
  r.text_left_ -= text.size();
  return kept;
}

void ProfilerResult::Builder::add_event(const Event& event) {
  std::vector<Event>& events = result_->events_;
  if (events.size() == events.capacity()) fresh_.reset();  // the events are about to move
  events.push_back(event);
  // What sort_and_nest() would otherwise learn in a pass of its own over the events.
  grouped_ = grouped_ && event.thread >= last_thread_;
  last_thread_ = event.thread;
  max_thread_ = std::max(max_thread_, event.thread);
}

void ProfilerResult::Builder::reserve(std::size_t events) {
  fresh_.reset();
  std::vector<Event>& v = result_->events_;
  v.reserve(events);
  // Written right below, by the recorder: 104 bytes an event of fresh memory, whose pages cost
  // more than the events' own work. A second core maps them from the far end.
  fresh_ = util::FreshPages::start(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(Event));
}

void ProfilerResult::Builder::reserve_for_import(std::size_t events) {
  fresh_.reset();
  result_->events_.reserve(events);
  result_->details_.reserve(events);
}

std::int32_t ProfilerResult::Builder::add_detail(EventDetail detail) {
  result_->details_.push_back(std::move(detail));
  return static_cast<std::int32_t>(result_->details_.size() - 1);
}

std::int32_t ProfilerResult::Builder::add_other_args(std::string_view json_object) {
  if (json_object.empty()) return -1;
  result_->other_args_.push_back(keep_text(json_object));
  return static_cast<std::int32_t>(result_->other_args_.size() - 1);
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
void ProfilerResult::Builder::set_rank(std::int64_t rank) { result_->rank_ = rank; }
void ProfilerResult::Builder::set_device_properties(std::string json_array) {
  result_->device_properties_ = std::move(json_array);
}

namespace {
// How many names of a kind (categories, flow categories) are searched before they are hashed.
constexpr std::size_t kSearchUpTo = 16;
}  // namespace

std::uint16_t ProfilerResult::Builder::category(std::string_view name) {
  std::vector<std::string>& c = result_->categories_;
  if (category_index_.empty()) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i] == name) return static_cast<std::uint16_t>(i);
    }
  } else if (const auto it = category_index_.find(name); it != category_index_.end()) {
    return it->second;
  }
  if (c.size() > 0xFFFF) throw Error("a result holds at most 65535 distinct event categories");
  c.emplace_back(name);
  if (c.size() > kSearchUpTo) {
    if (category_index_.empty()) {
      for (std::size_t i = 0; i + 1 < c.size(); ++i) {
        category_index_.emplace(keep(c[i]), static_cast<std::uint16_t>(i));
      }
    }
    category_index_.emplace(keep(name), static_cast<std::uint16_t>(c.size() - 1));
  }
  return static_cast<std::uint16_t>(c.size() - 1);
}

void ProfilerResult::Builder::add_process(ProcessInfo process) {
  result_->processes_.push_back(std::move(process));
}

void ProfilerResult::Builder::reserve_flows(std::size_t flows) { flows_.reserve(flows); }

void ProfilerResult::Builder::add_flow(std::string_view category, std::int64_t id, FlowEnd from,
                                       FlowEnd to) {
  // A result has a handful of flow categories ("ac2g", "fwdbwd"): each kept once, searched
  // while few, hashed past kSearchUpTo (a hostile trace may have one per flow).
  std::size_t kept = flow_categories_.size();
  if (flow_category_index_.empty()) {
    kept = static_cast<std::size_t>(
        std::find(flow_categories_.begin(), flow_categories_.end(), category) -
        flow_categories_.begin());
  } else if (const auto it = flow_category_index_.find(category);
             it != flow_category_index_.end()) {
    kept = it->second;
  }
  if (kept == flow_categories_.size()) {
    flow_categories_.push_back(keep(category));
    if (flow_categories_.size() > kSearchUpTo) {
      if (flow_category_index_.empty()) {
        for (std::size_t i = 0; i < flow_categories_.size(); ++i) {
          flow_category_index_.emplace(flow_categories_[i], static_cast<std::uint32_t>(i));
        }
      } else {
        flow_category_index_.emplace(flow_categories_.back(), static_cast<std::uint32_t>(kept));
      }
    }
  }
  flows_.push_back({flow_categories_[kept], id, from, to});
}

SessionStats& ProfilerResult::Builder::stats() { return result_->stats_; }

std::string_view implied_category(EventKind kind, RecordScope scope) {
  switch (kind) {
    case EventKind::kRange:
    case EventKind::kAsyncRange:
      return scope == RecordScope::kUserScope ? "user_annotation" : "cpu_op";
    case EventKind::kInstant:
    case EventKind::kMemory:
      return "cpu_instant_event";
    case EventKind::kKernel:
      return "kernel";
    case EventKind::kMemcpy:
      return "gpu_memcpy";
    case EventKind::kMemset:
      return "gpu_memset";
    case EventKind::kRuntime:
      return "cuda_runtime";
    case EventKind::kDriver:
      return "cuda_driver";
    case EventKind::kGpuAnnotation:
      return "gpu_user_annotation";
    case EventKind::kOther:
      break;
  }
  return "";
}

std::string_view ProfilerResult::category(const Event& e) const {
  if (e.category != 0 && e.category < categories_.size()) return categories_[e.category];
  return implied_category(e.kind, e.scope);
}

namespace {

// The order of a result: thread, start ascending, longer first on equal starts (so an
// enclosing event comes before what it holds), then by handle for a stable order among
// identical spans.
bool before(const Event& a, const Event& b) {
  if (a.thread != b.thread) return a.thread < b.thread;
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
  return a.handle < b.handle;
}

// Links events into trees: visited in the result's order, each range becomes the child of the
// innermost range open on its thread that holds it, with a stack of the open ones. Async ranges
// and instants neither hold nor join the nesting: async ranges overlap freely by nature. A
// range's self time is final when it closes (no child comes after): it is clamped at 0 then,
// rather than in a pass of its own (each pass over 104-byte events is memory-bound).
class Nesting {
 public:
  explicit Nesting(std::vector<Event>& events) : events_(events) {}

  void visit(std::size_t i) {
    Event& e = events_[i];
    e.parent = e.first_child = e.next_sibling = -1;
    e.self_ns = e.duration_ns();
    if (e.thread != current_thread_) {
      close_all();
      current_thread_ = e.thread;
    }
    if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory) {
      // Owned by the innermost range still open at this time; not linked as a child.
      while (!open_.empty() && at(open_.back()).end_ns < e.start_ns) close();
      if (!open_.empty()) e.parent = open_.back();
    }
    if (e.kind != EventKind::kRange) {
      e.self_ns = std::max<std::int64_t>(e.self_ns, 0);
      return;
    }
    // Close what ended before this one starts; a range that is not contained in the one on
    // top (ended out of order) also closes it, so nesting stays a tree.
    while (!open_.empty() && at(open_.back()).end_ns < e.end_ns) close();
    while (!open_.empty() && at(open_.back()).end_ns <= e.start_ns && e.duration_ns() > 0) {
      close();
    }
    const auto self = static_cast<std::int32_t>(i);
    if (!open_.empty()) {
      const std::int32_t parent = open_.back();
      Event& p = at(parent);
      e.parent = parent;
      // Saturated: children that overlap each other (an out-of-order trace) can take more
      // than the parent lasted, many times over; the self time is clamped at 0 on close.
      p.self_ns = internal::saturating_sub(p.self_ns, e.duration_ns());
      if (last_child_.back() < 0) {
        p.first_child = self;
      } else {
        at(last_child_.back()).next_sibling = self;
      }
      last_child_.back() = self;
    }
    open_.push_back(self);
    last_child_.push_back(-1);
  }

  void close_all() {
    while (!open_.empty()) close();
  }

 private:
  Event& at(std::int32_t i) { return events_[static_cast<std::size_t>(i)]; }
  void close() {
    Event& closed = at(open_.back());
    closed.self_ns = std::max<std::int64_t>(closed.self_ns, 0);
    open_.pop_back();
    last_child_.pop_back();
  }

  std::vector<Event>& events_;
  std::vector<std::int32_t> open_;
  std::vector<std::int32_t> last_child_;  // per open depth: last child linked, for siblings
  std::int32_t current_thread_ = -1;
};

// Each thread's part of `order` (its indices together, `earlier` ordering them, the threads
// in order) that is a few long sorted runs, merged into one. An importer's events are like
// that: Kineto writes a thread's operators by start, then its runtime calls by start, and
// inserting each call back past the operators that start after it moved 217 k indices for the
// 27 k events of analyze_bench's trace before std::sort took over (a tenth of reading it); a
// merge moves each index once per level. A recorder's (a range after the ranges it encloses)
// has a run per enclosing range and is left to the insertion below.
template <typename Earlier>
void merge_long_runs(const std::vector<Event>& events, std::vector<std::uint32_t>& order,
                     const Earlier& earlier) {
  constexpr std::size_t kMinRunLength = 32;  // on average, for a thread's runs to be merged
  std::vector<std::size_t> runs;             // where each run of the thread begins, then its end
  std::vector<std::size_t> next_level;
  const auto thread = [&](std::size_t p) { return events[order[p]].thread; };
  for (std::size_t begin = 0; begin < order.size();) {
    runs.assign(1, begin);
    std::size_t end = begin + 1;
    for (; end < order.size() && thread(end) == thread(begin); ++end) {
      if (earlier(order[end], order[end - 1])) runs.push_back(end);
    }
    if (runs.size() > 1 && (end - begin) / runs.size() >= kMinRunLength) {
      runs.push_back(end);
      while (runs.size() > 2) {  // adjacent runs merged pairwise, level by level
        next_level.clear();
        std::size_t r = 0;
        for (; r + 2 < runs.size(); r += 2) {
          std::inplace_merge(order.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                             order.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                             order.begin() + static_cast<std::ptrdiff_t>(runs[r + 2]), earlier);
          next_level.push_back(runs[r]);
        }
        for (; r < runs.size(); ++r) next_level.push_back(runs[r]);  // an odd run, the end
        runs.swap(next_level);
      }
    }
    begin = end;
  }
}

// Sorts the events into the result's order and nests them (visits each with `nesting` once it
// is in its place), in time linear in their number for what a recorder produces, touching
// little memory besides the events themselves (fresh memory is what stop() mostly pays for:
// bench/RESULTS.md).
//
// A thread's buffer holds ranges in the order they ended: nested ranges arrive children
// first, so each range is out of place only by the ranges it encloses. An array of indices
// (4 bytes an event, not the 104 of an Event) is sorted by insertion, each index moving back
// past the ones it should precede (found by binary search when that is far): the work is the
// number of events times their nesting depth. Should that exceed a few times the number of
// events (input in no particular order, from an importer) the rest is left to std::sort. The
// events are then moved into place block by block (below), without a second copy of them all,
// and nested while the block is in the cache: one pass over the events, not two.
// `grouped`: the events' threads never decrease (each thread's events together); `max_thread`:
// the largest thread index (the Builder keeps both as events are added).
void sort_and_nest(std::vector<Event>& events, bool grouped, std::int32_t max_thread,
                   Nesting& nesting) {
  const std::size_t n = events.size();
  std::size_t first_out_of_order = n;
  for (std::size_t i = 1; i < n; ++i) {
    if (before(events[i], events[i - 1])) {
      first_out_of_order = i;
      break;
    }
  }
  if (first_out_of_order == n) {
    for (std::size_t i = 0; i < n; ++i) nesting.visit(i);
    return;
  }

  std::vector<std::uint32_t> order(n);  // position p takes the event now at order[p]
  const auto earlier = [&](std::uint32_t a, std::uint32_t b) {
    return before(events[a], events[b]);
  };
  // Events with their threads interleaved (an importer's: Kineto writes a trace's events by
  // kind and time, not thread by thread) are first grouped by thread with a counting sort,
  // which keeps their order within each thread; a thread's events that come as a few long
  // sorted runs are merged (merge_long_runs), and the insertion below orders the rest (std::sort
  // of 270 k events of an imported trace was a tenth of reading it).
  if (!grouped && static_cast<std::size_t>(max_thread) < n) {
    std::vector<std::uint32_t> start(static_cast<std::size_t>(max_thread) + 2, 0);
    for (const Event& e : events) ++start[static_cast<std::size_t>(e.thread) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (std::size_t i = 0; i < n; ++i) {
      order[start[static_cast<std::size_t>(events[i].thread)]++] = static_cast<std::uint32_t>(i);
    }
    merge_long_runs(events, order, earlier);
    first_out_of_order = 1;
  } else {
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
  }
  const std::size_t budget = 8 * n + 1024;  // index moves before giving up on insertion
  std::size_t moved = 0;
  for (std::size_t i = first_out_of_order; i < n; ++i) {
    const Event& e = events[order[i]];
    if (!before(e, events[order[i - 1]])) continue;
    // Where it belongs in the sorted order[0, i): scan back a little, then search.
    std::size_t pos = i - 1;
    std::size_t steps = 0;
    while (pos > 0 && before(e, events[order[pos - 1]]) && ++steps < 16) --pos;
    if (steps == 16) {
      pos = static_cast<std::size_t>(
          std::upper_bound(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(pos),
                           order[i], earlier) -
          order.begin());
    }
    moved += i - pos;
    if (moved > budget) {
      std::sort(order.begin(), order.end(), earlier);
      break;
    }
    const std::uint32_t index = order[i];
    std::move_backward(order.begin() + static_cast<std::ptrdiff_t>(pos),
                       order.begin() + static_cast<std::ptrdiff_t>(i),
                       order.begin() + static_cast<std::ptrdiff_t>(i + 1));
    order[pos] = index;
  }

  // Move the events into place one block at a time: a block is the shortest run of positions
  // that takes its events from within itself (for a recorder's events, one tree of nested
  // ranges). A small block is copied out and written back in order, which streams through
  // memory; following the permutation's cycles instead chains each load on the one before:
  // 19 ns an event against 8 (1 M events of session_bench's shape). A block too large to copy
  // (a range enclosing most of the window) is done along its cycles, which stay inside it.
  constexpr std::size_t kMaxCopiedBlock = 4096;
  std::vector<Event> block;
  for (std::size_t first = 0; first < n;) {
    if (order[first] == first) {
      nesting.visit(first);
      ++first;
      continue;
    }
    std::size_t last = first;
    std::size_t reach = order[first];
    while (last < reach) reach = std::max<std::size_t>(reach, order[++last]);
    if (last - first < kMaxCopiedBlock) {
      block.assign(events.begin() + static_cast<std::ptrdiff_t>(first),
                   events.begin() + static_cast<std::ptrdiff_t>(last + 1));
      for (std::size_t p = first; p <= last; ++p) {
        events[p] = block[order[p] - first];
        nesting.visit(p);
      }
    } else {
      for (std::size_t start = first; start <= last; ++start) {
        if (order[start] == start) continue;
        Event carried = events[start];
        std::size_t p = start;
        while (order[p] != start) {
          const std::size_t from = order[p];
          events[p] = events[from];
          order[p] = static_cast<std::uint32_t>(p);  // done
          p = from;
        }
        events[p] = carried;
        order[p] = static_cast<std::uint32_t>(p);
      }
      for (std::size_t p = first; p <= last; ++p) nesting.visit(p);
    }
    first = last + 1;
  }
}

}  // namespace

// Each end of a flow is the innermost event of its thread that holds its time: the last one,
// in the result's order (thread, then start ascending, enclosing first), that starts at or
// before the time and has not ended before it. Binary searches find the thread's events and
// the last start at or before the time; the walk back from it climbs out of what ended too
// early (parents first for ranges; the few others are checked one by one).
void ProfilerResult::Builder::resolve_flows() {
  if (flows_.empty()) return;
  const std::vector<Event>& events = result_->events_;
  // Each thread's events are contiguous, in start order: where each thread's begin, found
  // once (a flow end then searches its thread's events alone). add_event kept the largest.
  const std::int32_t threads = max_thread_ + 1;
  std::vector<std::size_t> thread_begin(static_cast<std::size_t>(threads) + 1);
  for (std::int32_t t = 0; t <= threads; ++t) {
    thread_begin[static_cast<std::size_t>(t)] = static_cast<std::size_t>(
        std::lower_bound(events.begin(), events.end(), t,
                         [](const Event& e, std::int32_t thread) { return e.thread < thread; }) -
        events.begin());
  }
  const auto holder = [&](const FlowEnd& end) -> std::int32_t {
    if (end.thread < 0 || end.thread >= threads) return -1;  // a thread without events
    const auto first = events.begin() + static_cast<std::ptrdiff_t>(
                                            thread_begin[static_cast<std::size_t>(end.thread)]);
    const auto last = events.begin() + static_cast<std::ptrdiff_t>(
                                           thread_begin[static_cast<std::size_t>(end.thread) + 1]);
    auto it = std::upper_bound(first, last, end.time_ns,
                               [](std::int64_t ts, const Event& e) { return ts < e.start_ns; });
    // Climb back to an event that still holds the time; 64 steps bound the walk over
    // siblings that ended before it, then parents are followed.
    int steps = 0;
    const auto begin = static_cast<std::size_t>(first - events.begin());
    for (auto i = static_cast<std::size_t>(it - events.begin()); i-- > begin;) {
      const Event& e = events[i];
      if (e.end_ns >= end.time_ns) return static_cast<std::int32_t>(i);
      if (++steps == 64) {
        for (std::int32_t p = e.parent; p >= 0; p = events[static_cast<std::size_t>(p)].parent) {
          if (events[static_cast<std::size_t>(p)].end_ns >= end.time_ns) return p;
        }
        return -1;
      }
    }
    return -1;
  };
  result_->flows_.reserve(flows_.size());
  for (const PendingFlow& f : flows_) {
    result_->flows_.push_back({f.category, f.id, holder(f.from), holder(f.to)});
  }
  flows_ = {};  // its memory too: a trace's flows can be a million
}

std::shared_ptr<const ProfilerResult> ProfilerResult::Builder::finish() {
  std::vector<Event>& events = result_->events_;
  if (fresh_ != nullptr) {
    // Every event is written. The reserve counted a record's slots, and a range that is not
    // compact takes two: the pages mapped past the last event hold nothing.
    fresh_->stop_and_release(events.data() + events.size());
    fresh_.reset();
  }
  Nesting nesting(events);
  sort_and_nest(events, grouped_, max_thread_, nesting);
  nesting.close_all();
  result_->stats_.events_recorded = events.size();
  resolve_flows();

  std::shared_ptr<const ProfilerResult> out = std::move(result_);
  // Everything starts again, the kept flow categories too (their text is in `out`).
  *this = Builder();
  return out;
}

}  // namespace opscope
