// Native call stacks for the with_stack lens: captured at range begin into a fixed array of
// frame words, symbolized only at export (src/analysis/symbolizer.h).
//
//   std::uint64_t words[kMaxStackFrames];
//   std::size_t n = capture_stack(words, kMaxStackFrames, /*skip=*/1, with_modules);
//   // words[0] is the innermost kept frame, words[n - 1] the outermost
//
// Two unwinders (see stack_capture.cpp for the measurements behind the choice):
// kFramePointers, the default, walks the frame-pointer chain and needs code built with
// -fno-omit-frame-pointer (opscope's CMake target passes it on to everything that links it);
// kDwarf uses the unwind tables (.eh_frame) through libgcc's _Unwind_Backtrace, which works
// without frame pointers but costs several times more per frame.
#pragma once

#include <cstddef>
#include <cstdint>

#include "opscope/extension.h"

namespace opscope::record {

// Frames kept per stack, and the bit of a label word (opscope/extension.h, where a runtime
// that adds its own frames reads them).
using extension::kLabelFrameBit;
using extension::kMaxStackFrames;

// Writes the calling thread's stack into `out`, innermost first, as return addresses (each
// points just after a call instruction). The frames of capture_stack itself never appear;
// `skip` more are left out: the callers that are opscope's own. Called from a noinline
// function F that is called from the user's function U (directly, or through functions
// inlined into U), skip = 1 makes U's return address the first word. In builds without
// inlining (-O0), inline functions between U and F have frames of their own and count too.
//
// With `with_modules`, the thread's entered modules (opscope/module.h, internal::t_module)
// are placed as label words between the native frame of the function whose stack frame holds
// the ModuleScope and the frames that function called: innermost first, a module's word comes
// right before its owner's return address. Modules entered by foreign code (stack_address
// nullptr) are skipped: the foreign stack provider places them among its own frames. Modules whose owner lies beyond the captured
// frames (the depth limit) are put at the outer end, in order; room is kept for them, so a
// deep stack gives up native frames, never modules. When the frame-pointer chain stops early
// the outermost frame found is taken as the owner of the modules still unplaced (the chain
// usually stops in the runtime's thread start, below main or the thread's function).
//
// Returns the number of words written (at most `max`). Never throws, never allocates (except
// once per thread, the first time: the thread's stack bounds are looked up with
// pthread_getattr_np; a capture re-entered from that lookup, e.g. by a malloc hook, returns
// 0), never faults on a corrupt or frame-pointer-less stack with kFramePointers: every frame
// pointer must lie inside the thread's stack, above the previous one and aligned, or the walk
// stops there.
//
// Cost (bench/stack_bench.cpp, this 2-core machine): about 2 ns per frame with
// kFramePointers (25 ns for 10 frames), about 100 times that with kDwarf (stack_capture.cpp).
std::size_t capture_stack(std::uint64_t* out, std::size_t max, std::size_t skip,
                          bool with_modules) noexcept;

// Frames of a foreign runtime (Python) that the native walk cannot name: the provider
// (opscope/extension.h says what it may do and what it costs) gets a recorded range's native
// words, capture_stack's, innermost first. The Python provider
// (python/src/python_stacks.cpp) replaces the interpreter's native frames, and everything
// outside them, by the thread's Python frames: Python code is the outer caller of the native
// code it runs, so its frames come after the native ones.
using extension::ForeignStackProvider;

// Installs `provider` for every thread (nullptr removes it). Thread-safe; the provider must
// stay callable until the process exits or it is replaced and no range is being begun.
void set_foreign_stack_provider(ForeignStackProvider provider) noexcept;
ForeignStackProvider foreign_stack_provider() noexcept;

// How capture_stack walks the stack. Values are stable (they may reach a config file).
enum class Unwinder : std::uint8_t {
  kFramePointers = 0,  // fast; needs -fno-omit-frame-pointer in the code being walked
  kDwarf = 1,          // libgcc's _Unwind_Backtrace: unwind tables, no frame pointers needed
};

// Selects the unwinder for every thread, from the next capture on. The default is
// unwinder_named(getenv("OPSCOPE_UNWINDER")), read at the first capture. Thread-safe (one
// relaxed atomic).
void set_unwinder(Unwinder unwinder) noexcept;
Unwinder unwinder() noexcept;

// The unwinder an OPSCOPE_UNWINDER value names: "dwarf" (any case) is kDwarf; anything else,
// null or empty included, is kFramePointers ("fp", "frame_pointers" name it explicitly).
Unwinder unwinder_named(const char* value) noexcept;

}  // namespace opscope::record
