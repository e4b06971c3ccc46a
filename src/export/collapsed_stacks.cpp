// The collapsed-stacks exporter (export_stacks). See collapsed_stacks.h for the format.
//
// Lines are aggregated per distinct (stack, range name) before they are written: a training
// loop runs the same operator from the same place thousands of times, and one line each (as
// PyTorch writes) would make the file as large as the trace while every consumer sums them
// anyway. Summing nanoseconds before rounding also keeps the time of ranges shorter than a
// microsecond, which PyTorch's per-event integer truncation drops.
#include "export/collapsed_stacks.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/stacks.h"
#include "analysis/symbolizer.h"
#include "opscope/error.h"
#include "opscope/key_averages.h"
#include "util/wide_sums.h"

namespace opscope::internal {
namespace {

constexpr std::string_view kSelfCpu = "self_cpu_time_total";
constexpr std::string_view kSelfCuda = "self_cuda_time_total";

enum class Metric { kSelfCpu, kSelfCuda };

Metric parse_metric(std::string_view metric) {
  if (metric == kSelfCpu) return Metric::kSelfCpu;
  if (metric == kSelfCuda) return Metric::kSelfCuda;
  throw Error("export_stacks: unknown metric '" + std::string(metric) + "'; use " +
              std::string(kSelfCpu) + " or " + std::string(kSelfCuda));
}

void check_recorded_with_stack(const ProfilerResult& result) {
  if (!result.lenses().with_stack) {
    throw Error(
        "export_stacks needs call stacks, but this result was recorded without with_stack: "
        "create the Profiler with with_stack = true");
  }
}

struct LineKey {
  std::int32_t stack;
  std::string_view name;
  bool operator==(const LineKey&) const = default;
};
struct LineKeyHash {
  std::size_t operator()(const LineKey& k) const noexcept {
    return std::hash<std::string_view>{}(k.name) * 31 + static_cast<std::size_t>(k.stack);
  }
};

}  // namespace

void append_collapsed_frame(std::string& out, std::string_view text) {
  for (char c : text) {
    const bool separator = c == ' ' || c == ';' || c == '\n' || c == '\r' || c == '\t';
    out.push_back(separator ? '_' : c);
  }
}

void write_collapsed_stacks(const ProfilerResult& result, std::string_view metric_name,
                            Sink& sink) {
  const Metric metric = parse_metric(metric_name);
  check_recorded_with_stack(result);
  // self_cuda_time_total: each range weighs the GPU work launched directly in it.
  const EventCuda cuda = metric == Metric::kSelfCuda ? event_cuda(result) : EventCuda{};
  if (metric == Metric::kSelfCuda && cuda.self.empty()) {
    warn(
        "export_stacks: self_cuda_time_total: this result holds no CUDA time, the stack file "
        "is empty; use self_cpu_time_total");
    sink.commit();
    return;
  }

  // Distinct lines in the order they first appear, with their summed self time.
  analysis::Symbolizer symbolizer;
  std::unordered_map<LineKey, std::size_t, LineKeyHash> line_of;
  std::unordered_map<std::string, std::size_t> line_of_text;  // two keys may read the same
  std::vector<std::pair<std::string, std::int64_t>> lines;
  const auto& stacks = result.stacks();
  std::size_t with_stack = 0;
  const std::vector<Event>& events = result.events();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind != EventKind::kRange && e.kind != EventKind::kAsyncRange) continue;
    const EventDetail* detail = result.detail(e);
    if (detail == nullptr || detail->stack < 0 ||
        static_cast<std::size_t>(detail->stack) >= stacks.size()) {
      continue;
    }
    ++with_stack;
    const LineKey key{detail->stack, e.name};
    auto it = line_of.find(key);
    if (it == line_of.end()) {
      // Root first: stacks are innermost first; the range itself is the leaf. stack_text
      // leaves out opscope's own recording frames, as tables and traces do.
      const std::vector<std::string> frames = analysis::stack_text(result, e, symbolizer);
      std::string text;
      for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
        append_collapsed_frame(text, *f);
        text.push_back(';');
      }
      append_collapsed_frame(text, e.name);
      auto [by_text, added] = line_of_text.try_emplace(std::move(text), lines.size());
      if (added) lines.emplace_back(by_text->first, 0);
      it = line_of.emplace(key, by_text->second).first;
    }
    // Saturated (util/wide_sums.h): the line's count is written as an integer of microseconds,
    // and a stack's self times over many long events can pass INT64_MAX ns.
    std::int64_t& ns = lines[it->second].second;
    ns = internal::saturating_add(ns, metric == Metric::kSelfCuda ? cuda.self[i] : e.self_ns);
  }

  std::string out;
  std::size_t written = 0;
  for (const auto& [text, ns] : lines) {
    const auto us = static_cast<std::int64_t>(std::llround(static_cast<double>(ns) / 1000.0));
    if (us <= 0) continue;
    out.append(text);
    out.push_back(' ');
    out.append(std::to_string(us));
    out.push_back('\n');
    ++written;
    if (out.size() >= (1 << 20)) {
      sink.write(out);
      out.clear();
    }
  }
  sink.write(out);
  sink.commit();

  if (with_stack == 0) {
    warn(
        "export_stacks: no range in this result has a call stack (ranges recorded with "
        "with_stack get one); the stack file is empty");
  } else if (written == 0) {
    warn("export_stacks: every stack's self time rounds to 0 us; the stack file is empty");
  }
}

void export_collapsed_stacks(const ProfilerResult& result, const std::string& path,
                             std::string_view metric) {
  // Checked before the file is opened, so that a wrong call creates nothing at all.
  parse_metric(metric);
  check_recorded_with_stack(result);
  std::unique_ptr<Sink> sink = open_file_sink(path, {.what = "stack file"});
  write_collapsed_stacks(result, metric, *sink);
}

}  // namespace opscope::internal
