// Turns native return addresses into function names and source locations, once per address.
//
// Stacks are captured as raw frame words on the hot path (src/record/stack_capture.h); only
// export and analysis symbolize them, through one Symbolizer per export, which caches every
// address it resolved. A Symbolizer is used by one thread at a time; the first native
// address it resolves reads the process's module list (/proc/self/maps), later ones read
// the debug info of the modules they fall in, once per module.
//
//   analysis::Symbolizer symbolizer;
//   for (const StackFrame& f : result.stacks()[i]) lines.push_back(symbolizer.text(f));
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <unordered_map>

#include "opscope/result.h"

namespace opscope::analysis {

// A function whose code the compiler inlined where the address is: its name and the line in
// it (the address's own line for the innermost one; for the others, the line that called the
// next inner one).
struct InlinedFrame {
  std::string function;  // demangled
  std::string file;
  int line = 0;
};

struct SymbolizedFrame {
  std::string function;      // demangled; empty when unknown
  std::string file;          // source file when debug info has it, else empty
  int line = 0;              // 0 when unknown
  std::string object;        // the binary or shared object the address is in
  std::uint64_t offset = 0;  // address relative to that object's load base
  // With debug info, the inlined functions the address is in, innermost first; `file` and
  // `line` above are then where the outermost of them was called, in `function`.
  std::vector<InlinedFrame> inlined;
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Resolves a return address (looked up at pc - 1, inside the call). Cached: the reference
  // stays valid for the Symbolizer's lifetime. `offset` is the return address's own offset.
  const SymbolizedFrame& resolve(std::uint64_t pc);

  // One frame as text, in PyTorch's "file(line): function" shape:
  //   "demo_training.cpp(120): Linear::forward(Tensor const&)" with debug info,
  //   "Linear::forward(Tensor const&)" without, "libfoo.so+0x1a2b" when nothing is known;
  // labelled frames are their label ("nn.Module: Linear_0").
  std::string text(const StackFrame& frame);

  // The frame as a user reads it, innermost first, appended to `out`: each function inlined
  // at the address as a frame of its own (at the line where it is), then text(frame); inlined
  // frames of opscope itself (a RecordFunction constructor) are left out, so a range's
  // innermost frame is the user's function and line where it was opened, even when that
  // function was inlined into its caller.
  void append_texts(const StackFrame& frame, std::vector<std::string>& out);

  // True when this build reads debug info (libdw): file:line, inlined call sites and static
  // functions. Without it, functions come from the dynamic symbol table only (dladdr).
  static bool reads_debug_info();

 private:
  struct Impl;
  Impl* impl_;
  std::unordered_map<std::uint64_t, SymbolizedFrame> cache_;
};

}  // namespace opscope::analysis
