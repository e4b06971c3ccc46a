#include "analysis/stacks.h"

#include <string_view>

namespace opscope::analysis {
namespace {

// Frames of the recording machinery itself: what the capture could not skip by count (the
// dynamic-name and two-phase entry points add a frame or two).
bool is_recording_frame(Symbolizer& symbolizer, const StackFrame& frame) {
  if (!frame.is_native()) return false;
  const std::string& fn = symbolizer.resolve(frame.pc).function;
  return std::string_view(fn).starts_with("opscope::RecordFunction::") ||
         std::string_view(fn).starts_with("opscope::record::");
}

}  // namespace

std::vector<std::string> stack_text(const ProfilerResult& result, const Event& event,
                                    Symbolizer& symbolizer, std::size_t max_frames) {
  std::vector<std::string> out;
  const EventDetail* d = result.detail(event);
  if (d == nullptr || d->stack < 0) return out;
  const std::vector<StackFrame>& frames = result.stacks()[static_cast<std::size_t>(d->stack)];
  std::size_t i = 0;
  while (i < frames.size() && is_recording_frame(symbolizer, frames[i])) ++i;
  // The outermost frames that nothing can name are a thread's start-up code (libstdc++'s
  // std::thread trampoline, stripped of its symbols): "libstdc++.so.6+0xd44a3" tells a user
  // nothing, so a stack ends at the outermost frame with a name.
  std::size_t end = frames.size();
  while (end > i && frames[end - 1].is_native() &&
         symbolizer.resolve(frames[end - 1].pc).function.empty()) {
    --end;
  }
  for (; i < end && (max_frames == 0 || out.size() < max_frames); ++i) {
    symbolizer.append_texts(frames[i], out);
  }
  if (max_frames != 0 && out.size() > max_frames) out.resize(max_frames);
  return out;
}

}  // namespace opscope::analysis
