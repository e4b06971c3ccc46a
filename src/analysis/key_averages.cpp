// key_averages(): one row per distinct event key, in order of first appearance.
//
// A window holds millions of events but only hundreds of distinct names, and the collector
// interns names, so events from one call site share one name pointer. Grouping therefore
// happens in two passes: a flat hash table keyed by the name's (pointer, length) accumulates
// every event with no string hashing or comparison, and a second pass merges the few groups
// whose name text is equal (the same name from two call sites, or a dynamic name). 1 M events
// take a few milliseconds (bench/table_bench.cpp).
#include "opscope/key_averages.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/event_rows.h"
#include "analysis/flops.h"
#include "analysis/inputs_text.h"
#include "analysis/stacks.h"
#include "opscope/error.h"
#include "util/wide_sums.h"

namespace opscope {
namespace {

// What makes two events the same row on the fast path: the name. Grouping by input shapes or
// stack takes the keyed path in key_averages() instead.
struct GroupKey {
  std::string_view name;
};

GroupKey key_of(const Event& e) { return GroupKey{row_name(e.name)}; }

bool text_equal(const GroupKey& a, const GroupKey& b) { return a.name == b.name; }

struct TextHash {
  std::size_t operator()(const GroupKey& k) const { return std::hash<std::string_view>{}(k.name); }
};
struct TextEqual {
  bool operator()(const GroupKey& a, const GroupKey& b) const { return text_equal(a, b); }
};

constexpr std::uint32_t bit(EventKind k) { return 1u << static_cast<unsigned>(k); }

bool is_gpu_work(const Event& e) {
  constexpr std::uint32_t kWork =
      bit(EventKind::kKernel) | bit(EventKind::kMemcpy) | bit(EventKind::kMemset);
  return ((kWork >> static_cast<unsigned>(e.kind)) & 1u) != 0;
}

// Sums of one group of events. Saturated (util/wide_sums.h): the row's fields are int64, and a
// group of many long events (a trace's times may each be up to 2^62 ns) can pass INT64_MAX;
// such a total stays at INT64_MAX (292 years) instead of wrapping negative.
struct Partial {
  GroupKey key;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t self_ns = 0;
  std::int64_t memory = 0;  // CPU bytes
  std::int64_t self_memory = 0;
  std::int64_t cuda_memory = 0;
  std::int64_t self_cuda_memory = 0;
  std::int64_t flops = 0;
  std::int64_t cuda_ns = 0;
  std::int64_t self_cuda_ns = 0;
  std::size_t first = 0;  // index of the first event, for its shapes and stack
  bool is_async = false;
  bool top_level = false;
  bool is_device = false;

  void add(const Event& e) {
    ++count;
    const bool gpu = is_gpu_work(e);
    is_device |= gpu;
    // GPU work has no CPU time (torch's device rows).
    total_ns = internal::saturating_add(total_ns, gpu ? 0 : e.duration_ns());
    self_ns = internal::saturating_add(self_ns, gpu ? 0 : e.self_ns);
    is_async |= e.kind == EventKind::kAsyncRange;
    top_level |= e.parent < 0;
  }
  void merge(const Partial& o) {
    using internal::saturating_add;
    count += o.count;
    total_ns = saturating_add(total_ns, o.total_ns);
    self_ns = saturating_add(self_ns, o.self_ns);
    memory = saturating_add(memory, o.memory);
    self_memory = saturating_add(self_memory, o.self_memory);
    cuda_memory = saturating_add(cuda_memory, o.cuda_memory);
    self_cuda_memory = saturating_add(self_cuda_memory, o.self_cuda_memory);
    flops = saturating_add(flops, o.flops);
    cuda_ns = saturating_add(cuda_ns, o.cuda_ns);
    self_cuda_ns = saturating_add(self_cuda_ns, o.self_cuda_ns);
    is_async |= o.is_async;
    top_level |= o.top_level;
    is_device |= o.is_device;
  }
};

// Adds event i's memory and GPU time (empty vectors: not recorded) to `p`.
void add_sums(Partial& p, std::size_t i, const EventMemory& memory, const EventCuda& cuda) {
  using internal::saturating_add;  // as Partial's sums
  if (i < memory.cpu.total.size()) {
    p.memory = saturating_add(p.memory, memory.cpu.total[i]);
    p.self_memory = saturating_add(p.self_memory, memory.cpu.self[i]);
    p.cuda_memory = saturating_add(p.cuda_memory, memory.cuda.total[i]);
    p.self_cuda_memory = saturating_add(p.self_cuda_memory, memory.cuda.self[i]);
  }
  if (i < cuda.total.size()) {
    p.cuda_ns = saturating_add(p.cuda_ns, cuda.total[i]);
    p.self_cuda_ns = saturating_add(p.self_cuda_ns, cuda.self[i]);
  }
}

// Per-event sums of the lenses, indexed like result.events(); empty when the window did not
// record the lens.
struct LensSums {
  EventMemory memory;
  std::vector<std::int64_t> flops;
  EventCuda cuda;

  explicit LensSums(const ProfilerResult& result)
      : memory(event_memory(result)), cuda(event_cuda(result)) {
    const std::vector<Event>& events = result.events();
    if (result.lenses().with_flops) {
      flops.assign(events.size(), 0);
      for (std::size_t i = 0; i < events.size(); ++i) {
        if (result.detail(events[i]) != nullptr) flops[i] = analysis::flops_of(result, events[i]);
      }
    }
  }

  void add(Partial& p, std::size_t i) const {
    add_sums(p, i, memory, cuda);
    if (!flops.empty()) p.flops = internal::saturating_add(p.flops, flops[i]);
  }
};

FunctionEventAvg row_of(const Partial& p) {
  FunctionEventAvg row;
  row.key = std::string(p.key.name);
  row.count = p.count;
  row.cpu_time_total_ns = p.total_ns;
  row.self_cpu_time_total_ns = p.self_ns;
  row.is_async = p.is_async;
  row.top_level = p.top_level;
  row.cpu_memory_usage = p.memory;
  row.self_cpu_memory_usage = p.self_memory;
  row.cuda_memory_usage = p.cuda_memory;
  row.self_cuda_memory_usage = p.self_cuda_memory;
  row.flops = p.flops;
  row.cuda_time_total_ns = p.cuda_ns;
  row.self_cuda_time_total_ns = p.self_cuda_ns;
  row.is_device = p.is_device;
  return row;
}

// The rows of torch 1.13's table under Kineto: operators (ranges), runtime and driver calls
// (cudaLaunchKernel: CPU time), GPU work (CUDA time, no CPU time), and allocation reports made
// outside every operator (`memory_rows`: the window recorded memory), whose bytes no operator
// accounts for.
bool is_row_event(const Event& e, bool memory_rows) {
  constexpr std::uint32_t kRows = bit(EventKind::kRange) | bit(EventKind::kAsyncRange) |
                                  bit(EventKind::kRuntime) | bit(EventKind::kDriver) |
                                  bit(EventKind::kKernel) | bit(EventKind::kMemcpy) |
                                  bit(EventKind::kMemset);
  if (((kRows >> static_cast<unsigned>(e.kind)) & 1u) != 0) return true;
  return memory_rows && e.kind == EventKind::kMemory && e.parent < 0;
}

// Open addressing on the name's address and length: identity, not text. Linear probing over a
// power-of-two table kept at most half full; a few hundred entries stay in L1.
class IdentityTable {
 public:
  IdentityTable() : slots_(256) {}

  // The index into `partials` of the group for `key`, created (in first-seen order) if new.
  std::size_t find_or_add(const GroupKey& key, std::vector<Partial>& partials) {
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.data == key.name.data() && s.size == key.name.size() && s.index >= 0) {
        return static_cast<std::size_t>(s.index);
      }
      if (s.index < 0) {
        s = Slot{key.name.data(), key.name.size(), static_cast<std::int64_t>(partials.size())};
        partials.push_back(Partial{key});
        if (2 * partials.size() > slots_.size()) grow();
        return partials.size() - 1;
      }
    }
  }

 private:
  struct Slot {
    const char* data = nullptr;
    std::size_t size = 0;
    std::int64_t index = -1;  // -1: empty
  };

  static std::size_t hash(const GroupKey& key) {
    auto x = reinterpret_cast<std::uintptr_t>(key.name.data()) ^ (key.name.size() << 48);
    x *= 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: spreads aligned addresses
    return static_cast<std::size_t>(x >> 20);
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.index < 0) continue;
      std::size_t i = hash(GroupKey{std::string_view(s.data, s.size)}) & mask;
      while (slots_[i].index >= 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
};

}  // namespace

std::string_view row_name(std::string_view name) {
  // One static string, so that identity grouping sees every step as one key.
  static constexpr std::string_view kSteps = "ProfilerStep*";
  return name.starts_with("ProfilerStep#") ? kSteps : name;
}

namespace {

KeyAverages average(const ProfilerResult& result, const std::vector<bool>* included,
                    bool group_by_input_shape, int group_by_stack_n) {
  if (group_by_stack_n < 0) {
    throw Error("key_averages: group_by_stack_n must be >= 0 (0 = do not group by stack), got " +
                std::to_string(group_by_stack_n));
  }
  const std::vector<Event>& events = result.events();
  const LensSums sums(result);
  const bool memory_rows = result.lenses().profile_memory;
  std::vector<Partial> merged;
  // Texts of each distinct stack, computed once (symbolizing is the expensive part).
  std::optional<analysis::Symbolizer> symbolizer;  // created on first use
  std::vector<std::vector<std::string>> stack_texts(group_by_stack_n > 0 ? result.stacks().size()
                                                                         : 0);
  std::vector<bool> stack_done(stack_texts.size(), false);
  const auto stack_of = [&](const Event& e) -> const std::vector<std::string>* {
    const EventDetail* d = result.detail(e);
    if (group_by_stack_n == 0 || d == nullptr || d->stack < 0) return nullptr;
    const auto s = static_cast<std::size_t>(d->stack);
    if (!stack_done[s]) {
      if (!symbolizer) symbolizer.emplace();
      stack_texts[s] =
          analysis::stack_text(result, e, *symbolizer, static_cast<std::size_t>(group_by_stack_n));
      stack_done[s] = true;
    }
    return &stack_texts[s];
  };
  const auto shapes_of = [&](const Event& e) {
    const EventDetail* d = result.detail(e);
    return d == nullptr ? std::string("[]") : analysis::shapes_text(d->inputs);
  };

  if (group_by_input_shape || group_by_stack_n > 0) {
    // Keyed by text: name, shapes, stack frames. Slower than identity grouping, and only
    // taken when asked for.
    std::unordered_map<std::string, std::size_t> row_of;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (!is_row_event(e, memory_rows) || (included != nullptr && !(*included)[i])) continue;
      std::string key(row_name(e.name));
      if (group_by_input_shape) key.append("\x1f").append(shapes_of(e));
      if (const auto* stack = stack_of(e)) {
        for (const std::string& f : *stack) key.append("\x1f").append(f);
      }
      auto [it, added] = row_of.try_emplace(std::move(key), merged.size());
      if (added) merged.push_back(Partial{.key = key_of(e), .first = i});
      Partial& p = merged[it->second];
      p.add(e);
      sums.add(p, i);
    }
  } else {
    std::vector<Partial> partials;
    IdentityTable table;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (!is_row_event(e, memory_rows) || (included != nullptr && !(*included)[i])) continue;
      Partial& p = partials[table.find_or_add(key_of(e), partials)];
      if (p.count == 0) p.first = i;
      p.add(e);
      sums.add(p, i);
    }
    // Merge groups with equal text. Groups were created in order of first appearance, so the
    // first group of each text is its earliest event and the rows keep first-seen order.
    std::unordered_map<GroupKey, std::size_t, TextHash, TextEqual> row_of;
    row_of.reserve(partials.size());
    merged.reserve(partials.size());
    for (const Partial& p : partials) {
      auto [it, added] = row_of.try_emplace(p.key, merged.size());
      if (added) {
        merged.push_back(p);
      } else {
        merged[it->second].merge(p);
      }
    }
  }

  std::vector<FunctionEventAvg> rows;
  rows.reserve(merged.size());
  for (const Partial& p : merged) {
    FunctionEventAvg row = row_of(p);
    if (group_by_input_shape) row.input_shapes = shapes_of(events[p.first]);
    if (const auto* stack = stack_of(events[p.first])) row.stack = *stack;
    rows.push_back(std::move(row));
  }
  // Wide: only the percentages (doubles) are made of it.
  internal::WideSum self_total = 0;
  for (const FunctionEventAvg& r : rows) self_total += r.self_cpu_time_total_ns;
  if (self_total > 0) {
    for (FunctionEventAvg& r : rows) {
      r.self_cpu_percent_total =
          100.0 * static_cast<double>(r.self_cpu_time_total_ns) / static_cast<double>(self_total);
    }
  }
  KeyAverages out(std::move(rows));
  out.profile_memory = result.lenses().profile_memory;
  out.with_flops = result.lenses().with_flops;
  return out;
}

// Each range's value plus its descendants' (instants and memory events are not children):
// children follow their parents in events(), so one backward pass sums subtrees. Saturated,
// as Partial's sums: the vectors are int64 (EventMemory, EventCuda).
std::vector<std::int64_t> subtree_sums(const std::vector<Event>& events,
                                       std::vector<std::int64_t> own) {
  for (std::size_t i = events.size(); i-- > 0;) {
    const Event& e = events[i];
    if (e.kind == EventKind::kRange && e.parent >= 0) {
      std::int64_t& sum = own[static_cast<std::size_t>(e.parent)];
      sum = internal::saturating_add(sum, own[i]);
    }
  }
  return own;
}

}  // namespace

EventMemory event_memory(const ProfilerResult& result) {
  EventMemory out;
  if (!result.lenses().profile_memory) return out;
  const std::vector<Event>& events = result.events();
  out.cpu.self.assign(events.size(), 0);
  out.cuda.self.assign(events.size(), 0);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind != EventKind::kMemory) continue;
    const EventDetail* d = result.detail(e);
    if (d == nullptr || d->memory.action == MemoryAction::kVersion) continue;
    std::vector<std::int64_t>& self =
        d->memory.device.type == DeviceType::kCUDA ? out.cuda.self : out.cpu.self;
    self[i] = d->memory.bytes;  // a report's own bytes (subtree_sums leaves them there)
    if (e.parent >= 0) {  // saturated: "Bytes" are the file's, any int64
      std::int64_t& sum = self[static_cast<std::size_t>(e.parent)];
      sum = internal::saturating_add(sum, d->memory.bytes);
    }
  }
  out.cpu.total = subtree_sums(events, out.cpu.self);
  out.cuda.total = subtree_sums(events, out.cuda.self);
  return out;
}

GpuAttribution gpu_attribution(const ProfilerResult& result) {
  GpuAttribution out;
  out.spans = true;
  // GPU events sit on threads of a device (stream threads, the "CUDA events" row): without
  // one, there is nothing to find, and the events are not walked (a pass over a million
  // events costs a table a third of its time).
  if (std::none_of(result.threads().begin(), result.threads().end(),
                   [](const ThreadInfo& t) { return t.device >= 0; })) {
    return out;
  }
  const std::vector<Event>& events = result.events();
  bool any_work = false;
  bool any_span = false;
  for (const Event& e : events) {
    any_work |= is_gpu_work(e);
    any_span |= e.kind == EventKind::kGpuAnnotation;
  }
  out.spans = !any_work;
  if (!any_work && !any_span) return out;  // a CPU-only window: no map of every range
  // The operators by handle: GPU events' "External id" names the one they belong to.
  std::unordered_map<std::uint64_t, std::int32_t> op_of;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::kRange && e.handle != 0) {
      op_of.emplace(e.handle, static_cast<std::int32_t>(i));
    }
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (out.spans ? e.kind != EventKind::kGpuAnnotation : !is_gpu_work(e)) continue;
    const EventDetail* d = result.detail(e);
    if (d == nullptr || d->gpu.external_id <= 0) continue;
    const auto op = op_of.find(static_cast<std::uint64_t>(d->gpu.external_id));
    if (op != op_of.end()) out.links.push_back({op->second, static_cast<std::int32_t>(i)});
  }
  return out;
}

EventCuda event_cuda(const ProfilerResult& result) {
  EventCuda out;
  const std::vector<Event>& events = result.events();
  const GpuAttribution attribution = gpu_attribution(result);
  const auto duration = [&](std::int32_t i) {
    return events[static_cast<std::size_t>(i)].duration_ns();
  };
  if (attribution.spans) {
    // Ranges timed with CUDA events, as torch's legacy profiler counts them: the total is the
    // span, the self time what the children's spans leave of it.
    if (attribution.links.empty()) return out;
    out.total.assign(events.size(), 0);
    for (const auto& [op, span] : attribution.links) {
      out.total[static_cast<std::size_t>(op)] = duration(span);
    }
    out.self = out.total;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (e.kind == EventKind::kRange && e.parent >= 0) {
        std::int64_t& self = out.self[static_cast<std::size_t>(e.parent)];
        self = internal::saturating_sub(self, out.total[i]);  // overlapping children
      }
    }
    return out;
  }
  out.self.assign(events.size(), 0);
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (is_gpu_work(events[i])) out.self[i] = events[i].duration_ns();
  }
  for (const auto& [op, work] : attribution.links) {
    std::int64_t& self = out.self[static_cast<std::size_t>(op)];
    self = internal::saturating_add(self, duration(work));  // many kernels of one op
  }
  out.total = subtree_sums(events, out.self);
  return out;
}

KeyAverages key_averages(const ProfilerResult& result, bool group_by_input_shape,
                         int group_by_stack_n) {
  return average(result, nullptr, group_by_input_shape, group_by_stack_n);
}

KeyAverages key_averages(const ProfilerResult& result, std::span<const std::int32_t> events,
                         bool group_by_input_shape, int group_by_stack_n) {
  std::vector<bool> included(result.events().size(), false);
  for (const std::int32_t i : events) {
    if (i < 0 || static_cast<std::size_t>(i) >= included.size()) {
      throw Error("key_averages: event index " + std::to_string(i) + " is not in the result (" +
                  std::to_string(included.size()) + " events)");
    }
    included[static_cast<std::size_t>(i)] = true;
  }
  return average(result, &included, group_by_input_shape, group_by_stack_n);
}

std::vector<FunctionEventAvg> analysis::event_rows(const ProfilerResult& result,
                                                   std::span<const std::int32_t> indices,
                                                   const EventMemory& memory, const EventCuda& cuda,
                                                   Symbolizer& symbolizer) {
  const std::vector<Event>& events = result.events();
  std::vector<FunctionEventAvg> rows;
  rows.reserve(indices.size());
  for (const std::int32_t i : indices) {
    if (i < 0 || static_cast<std::size_t>(i) >= events.size()) {
      throw Error("event_rows: event index " + std::to_string(i) + " is not in the result (" +
                  std::to_string(events.size()) + " events)");
    }
    const auto index = static_cast<std::size_t>(i);
    const Event& e = events[index];
    Partial p{.key = key_of(e)};
    p.add(e);
    add_sums(p, index, memory, cuda);
    FunctionEventAvg row = row_of(p);
    if (const EventDetail* d = result.detail(e)) {
      if (result.lenses().with_flops) row.flops = analysis::flops_of(result, e);
      if (result.lenses().record_shapes) row.input_shapes = analysis::shapes_text(d->inputs);
      if (d->stack >= 0) row.stack = analysis::stack_text(result, e, symbolizer);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace opscope
