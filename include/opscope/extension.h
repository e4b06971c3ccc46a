// opscope/extension.h: what a language runtime that embeds opscope needs beyond the user API.
//
// The Python package (python/src/) is built on this header and the other public ones alone;
// a binding for another runtime (Lua, the JVM through JNI, ...) would use the same calls:
//
//   // Python frames in with_stack stacks: the runtime appends label words to a range's stack.
//   opscope::extension::set_foreign_stack_provider(&my_runtime_frames);
//   // A label word names an interned text ("train.py(12): step").
//   words[n++] = opscope::extension::kLabelFrameBit | opscope::extension::intern(label);
//   // Threads named as the runtime names them ("MainThread", a Python thread's name).
//   opscope::extension::set_thread_name_hook(&my_thread_name);
//
// These are process-wide switches for the one runtime that hosts opscope; installing two
// providers replaces the first. Not for applications: they change how every session records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::extension {

// Frames kept per stack (with_stack); deeper stacks keep their innermost frames.
inline constexpr std::size_t kMaxStackFrames = 64;
// A stack's frame word is a native return address, or kLabelFrameBit | an interned label id
// (intern()): module frames "nn.Module: Linear_0", a runtime's frames "train.py(12): step".
// User-space addresses never set bit 63.
inline constexpr std::uint64_t kLabelFrameBit = 1ull << 63;

// The frames of a foreign runtime that the native walk cannot name. When a with_stack session
// records a range, the range's native frame words (innermost first) are handed to the
// provider, which may cut them and append its own label words, and returns the new count (at
// most `max`). It runs on the hot path of a recorded range, on the thread that begins it: it
// must not throw, must return quickly, and must decide itself whether it may look at its
// runtime (Python's: only with the GIL held). Module frames entered by foreign code
// (ModuleFrame::stack_address nullptr, opscope/module.h) are left to it.
// Cost when none is installed: one relaxed load per range recorded with with_stack.
using ForeignStackProvider = std::size_t (*)(std::uint64_t* words, std::size_t n,
                                             std::size_t max) noexcept;
// Installs `provider` for every thread (nullptr removes it). Thread-safe; the provider must
// stay callable until the process exits or it is replaced and no range is being begun.
void set_foreign_stack_provider(ForeignStackProvider provider) noexcept;

// The process-wide table of names: intern() returns the id of `text`, adding it if new
// (thread-safe; a lock only for names the calling thread has not seen before); interned()
// gives the text of an id back, valid until the process exits.
std::uint32_t intern(std::string_view text);
std::string_view interned(std::uint32_t id);

// Names the calling thread for results, or leaves `name` alone (returns false). Called once
// per thread, when it first records, inside the collector's slow path: it must not record or
// take a lock another recording thread may hold. nullptr removes the hook.
using ThreadNameHook = bool (*)(std::string* name);
void set_thread_name_hook(ThreadNameHook hook) noexcept;
// Names the calling thread through the hook now (registering it if it has not recorded yet).
// A thread whose first record is an allocation report registers unnamed, since the hook may not
// run inside an allocator: call this where the hook can run, before a session starts there.
void name_this_thread() noexcept;

// Marks the calling thread as doing opscope's own work while it lives, so that allocation
// reports made meanwhile (a malloc hook's, the runtime's own allocator's) are dropped instead
// of recorded: take one around what a stack provider allocates while a range is being begun
// (interning a new label). Nests.
class OwnWorkScope {
 public:
  OwnWorkScope() noexcept;
  ~OwnWorkScope();
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;
};

}  // namespace opscope::extension
