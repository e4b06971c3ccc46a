// SampleProfile: a batch of samples summed per function and per collapsed stack, with the
// ranges that were open on each sample's thread as the outermost frames.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "export/collapsed_stacks.h"
#include "export/sink.h"
#include "opscope/sampling.h"

namespace opscope {
namespace {

// For each sample, the names of the ranges open on its thread at its time, outer first.
//
// Per thread, samples in time order meet ranges in begin order: a range joins the open list
// when a sample comes after its begin and leaves it once a sample comes at or after its end.
// On one thread ranges nest, so the open list is short (the nesting depth) and stays in begin
// order, outer first; ranges that end on another thread (async ranges) are kept by the thread
// that began them, which is where their time is.
std::vector<std::vector<const SampledRange*>> open_ranges(const SampleBatch& batch,
                                                           const std::vector<SampledRange>& ranges) {
  std::vector<std::vector<const SampledRange*>> result(batch.samples.size());
  if (ranges.empty()) return result;
  std::unordered_map<std::int32_t, std::vector<const SampledRange*>> by_thread;
  for (const SampledRange& range : ranges) by_thread[range.tid].push_back(&range);
  for (auto& [tid, list] : by_thread) {
    std::stable_sort(list.begin(), list.end(), [](const SampledRange* a, const SampledRange* b) {
      if (a->begin_ns != b->begin_ns) return a->begin_ns < b->begin_ns;
      return a->end_ns > b->end_ns;  // the enclosing one first when two begin together
    });
  }
  std::unordered_map<std::int32_t, std::vector<std::size_t>> samples_by_thread;
  for (std::size_t i = 0; i < batch.samples.size(); ++i) {
    if (by_thread.contains(batch.samples[i].tid)) samples_by_thread[batch.samples[i].tid].push_back(i);
  }
  for (auto& [tid, indexes] : samples_by_thread) {
    std::stable_sort(indexes.begin(), indexes.end(), [&](std::size_t a, std::size_t b) {
      return batch.samples[a].time_ns < batch.samples[b].time_ns;
    });
    const std::vector<const SampledRange*>& list = by_thread[tid];
    std::vector<const SampledRange*> open;
    std::size_t next = 0;
    for (std::size_t index : indexes) {
      const std::uint64_t t = batch.samples[index].time_ns;
      while (next < list.size() && list[next]->begin_ns <= t) open.push_back(list[next++]);
      std::erase_if(open, [t](const SampledRange* r) { return r->end_ns <= t; });
      result[index] = open;
    }
  }
  return result;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "0.0%";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

SampleProfile SampleProfile::build(const SampleBatch& batch, const std::vector<SampledRange>& ranges) {
  SampleProfile profile;
  profile.event_ = batch.event;
  profile.fallback_reason_ = batch.fallback_reason;
  const std::vector<std::vector<const SampledRange*>> open = open_ranges(batch, ranges);
  std::set<std::string_view> seen;  // functions already counted in this sample's total
  std::string stack;
  for (std::size_t i = 0; i < batch.samples.size(); ++i) {
    const Sample& sample = batch.samples[i];
    ++profile.total_samples_;
    stack.clear();
    for (const SampledRange* range : open[i]) {
      if (!stack.empty()) stack += ';';
      internal::append_collapsed_frame(stack, range->name);
    }
    // perf gives frames innermost first; stacks are written root first.
    for (auto frame = sample.frames.rbegin(); frame != sample.frames.rend(); ++frame) {
      if (!stack.empty()) stack += ';';
      internal::append_collapsed_frame(stack, *frame);
    }
    if (stack.empty()) stack = "[no frames]";
    ++profile.stacks_[stack];

    seen.clear();
    for (std::size_t f = 0; f < sample.frames.size(); ++f) {
      const std::string& name = sample.frames[f];
      FunctionSamples& counts = profile.functions_[name];
      if (counts.name.empty()) counts.name = name;
      if (f == 0) ++counts.self_samples;
      if (seen.insert(name).second) ++counts.total_samples;  // recursion counts once
    }
  }
  return profile;
}

namespace {

std::vector<FunctionSamples> top(const std::map<std::string, FunctionSamples>& functions,
                                 std::size_t n, std::uint64_t FunctionSamples::*key) {
  std::vector<FunctionSamples> list;
  list.reserve(functions.size());
  for (const auto& [name, counts] : functions) {
    if (counts.*key > 0) list.push_back(counts);
  }
  std::sort(list.begin(), list.end(), [key](const FunctionSamples& a, const FunctionSamples& b) {
    if (a.*key != b.*key) return a.*key > b.*key;
    return a.name < b.name;
  });
  if (list.size() > n) list.resize(n);
  return list;
}

}  // namespace

std::vector<FunctionSamples> SampleProfile::top_by_self(std::size_t n) const {
  return top(functions_, n, &FunctionSamples::self_samples);
}

std::vector<FunctionSamples> SampleProfile::top_by_total(std::size_t n) const {
  return top(functions_, n, &FunctionSamples::total_samples);
}

std::string SampleProfile::collapsed_stacks() const {
  std::string text;
  for (const auto& [stack, count] : stacks_) text += fmt::format("{} {}\n", stack, count);
  return text;
}

void SampleProfile::write_collapsed_stacks(const std::string& path) const {
  internal::FileSinkOptions options;
  options.what = "collapsed stacks";
  std::unique_ptr<internal::Sink> sink = internal::open_file_sink(path, options);
  sink->write(collapsed_stacks());
  sink->commit();
}

std::string SampleProfile::summary(std::size_t n) const {
  std::string text = fmt::format("{} samples of '{}'", total_samples_, event_.empty() ? "?" : event_);
  if (!fallback_reason_.empty()) text += fmt::format(" ({})", fallback_reason_);
  text += '\n';
  // By Total, as `perf report --children` sorts: the callers (main, the loop that calls the hot
  // leaf) are listed with the time spent under them; by Self they had none and never showed.
  std::vector<FunctionSamples> rows = top_by_total(n);
  if (rows.empty()) return text + "no samples: the work ran too briefly, or only off-CPU\n";
  text += fmt::format("{:>8} {:>7} {:>8} {:>7}  {}\n", "Self", "Self %", "Total", "Total %", "Function");
  for (const FunctionSamples& row : rows) {
    std::string name = row.name.size() > 100 ? row.name.substr(0, 97) + "..." : row.name;
    text += fmt::format("{:>8} {:>7} {:>8} {:>7}  {}\n", row.self_samples,
                        percent(row.self_samples, total_samples_), row.total_samples,
                        percent(row.total_samples, total_samples_), name);
  }
  return text;
}

}  // namespace opscope
