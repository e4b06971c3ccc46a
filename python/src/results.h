// A finished window as the Python objects see it: the immutable ProfilerResult and the
// texts of its events (EventTexts: stacks symbolized once per address), shared by the EventList, FunctionEvent and KeyAverages made from
// it (they outlive the Profiler's next window).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "opscope/key_averages.h"
#include "opscope/result.h"

namespace opscope::python {

class ResultView {
 public:
  explicit ResultView(std::shared_ptr<const ProfilerResult> result) : result_(std::move(result)) {}

  const ProfilerResult& result() const { return *result_; }

  // The frames of `event`'s stack as text, innermost first (empty without one). Native frames
  // are symbolized once per address for the life of this view. Thread-safe.
  std::vector<std::string> stack(const Event& event);

  // Bytes of allocation reports on `device` inside event `index` (children included) and
  // directly in it; an allocation report's own bytes; 0 without the memory lens. Summed once
  // for the whole window, on first use. Thread-safe.
  std::int64_t memory(std::size_t index, bool self, DeviceType device);
  // GPU time of event `index`, its children's included or not (event_cuda), in ns.
  std::int64_t cuda(std::size_t index, bool self);
  // The GPU events that make up range `index`'s CUDA time (gpu_attribution), and whether they
  // are CUDA-event spans (torch's legacy timing) rather than launched work. Thread-safe.
  std::vector<std::int32_t> gpu_events_of(std::size_t index, bool* spans);

  // Table rows of single events (EventTexts::rows), with this view's memory sums and
  // symbolizer. Thread-safe.
  std::vector<FunctionEventAvg> rows(std::span<const std::int32_t> events);

 private:
  std::shared_ptr<const ProfilerResult> result_;
  std::mutex mutex_;
  std::unique_ptr<EventTexts> texts_;  // made on first use: its symbolizer reads /proc
  std::optional<EventMemory> memory_;  // made on first use
  std::optional<EventCuda> cuda_;      // made on first use
  // gpu_attribution() by range, made on first use.
  std::optional<std::unordered_map<std::int32_t, std::vector<std::int32_t>>> gpu_events_;
  bool gpu_spans_ = false;
};

}  // namespace opscope::python
