// EventTexts and the input texts (opscope/key_averages.h): the analysis layer's stack texts,
// event rows and input texts behind a public face, for the bindings.
#include "analysis/event_rows.h"
#include "analysis/inputs_text.h"
#include "analysis/stacks.h"
#include "analysis/symbolizer.h"
#include "opscope/key_averages.h"

namespace opscope {

EventTexts::EventTexts(const ProfilerResult& result)
    : result_(result), symbolizer_(std::make_unique<analysis::Symbolizer>()) {}

EventTexts::~EventTexts() = default;

std::vector<std::string> EventTexts::stack(const Event& event, std::size_t max_frames) {
  return analysis::stack_text(result_, event, *symbolizer_, max_frames);
}

std::vector<FunctionEventAvg> EventTexts::rows(std::span<const std::int32_t> events,
                                               const EventMemory& memory, const EventCuda& cuda) {
  return analysis::event_rows(result_, events, memory, cuda, *symbolizer_);
}

std::string input_type_text(const RecordedValue& v) { return analysis::type_text(v); }
std::string concrete_input_text(const RecordedValue& v) { return analysis::concrete_text(v); }

}  // namespace opscope
