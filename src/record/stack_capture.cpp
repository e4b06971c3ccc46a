// Stack capture for the with_stack lens.
//
// Why frame pointers by default: a range with with_stack pays for its capture on the hot
// path, and walking the frame-pointer chain is a load pair per frame (bench/stack_bench.cpp on
// this machine, where two counter reads take 22.6 ns: depth 10 in 25 ns, depth 30 in 63 ns,
// about 2 ns a frame; Tracy quotes ~300 ns at depth 10 for its libunwind-based capture).
// libgcc's _Unwind_Backtrace interprets .eh_frame for every frame and costs about 100 times
// more (depth 10 in 2.6 us, depth 30 in 6.3 us: ~0.65 us to start, ~190 ns a frame) but
// needs no frame pointers, so it stays available as Unwinder::kDwarf for programs built
// without them. It is not picked automatically: a chain that stops early is normal even in
// code built with frame pointers (glibc's thread start and libstdc++'s thread trampoline keep
// none), so "the chain broke" cannot tell a frame-pointer-less program from a normal one.
//
// Frame-pointer walk (x86-64 and AArch64 share the layout): fp[0] is the caller's frame
// pointer, fp[1] the return address into the caller. Safety: the walk starts at this
// function's own frame and only moves to a frame pointer that is aligned, strictly above the
// current one and below the top of the thread's stack, so every load is inside the part of
// the stack that is in use, which is mapped. Garbage in a frame-pointer register (a caller
// built without frame pointers) ends the walk or, rarely, adds a wrong frame; it never
// faults.
//
// Modules (with_modules): a ModuleScope lives in the frame of the function that entered it.
// The locals of the function a return address points into lie below that function's frame
// pointer (below its CFA for _Unwind_Backtrace, which reports it one frame late: see
// on_dwarf_frame), so a module whose address is below that bound and
// not yet placed belongs to that function or to one it called: its label goes right before
// the return address. Modules keep their chain order, which is their nesting order, so
// several modules in one frame come out right whatever the compiler's layout of locals.
#include "record/stack_capture.h"

#include <pthread.h>
#include <strings.h>
#include <unwind.h>

#include <atomic>
#include <cstdlib>

#include "collect/collector.h"
#include "opscope/module.h"

namespace opscope::record {
namespace {

// The calling thread's stack, looked up once. Trivial, so the thread_local needs no guard.
struct StackBounds {
  std::uintptr_t lo;
  std::uintptr_t hi;
  std::uint8_t state;  // kUnknown, kLooking, kReady, kFailed
};
enum : std::uint8_t { kUnknown = 0, kLooking = 1, kReady = 2, kFailed = 3 };

constinit thread_local StackBounds t_bounds __attribute__((tls_model(OPSCOPE_TLS_MODEL))) = {};

// 0xFF: not decided yet (the environment is read at the first capture).
std::atomic<std::uint8_t> g_unwinder{0xFF};

std::atomic<ForeignStackProvider> g_foreign_stack{nullptr};

// Looks the bounds up. pthread_getattr_np allocates (its affinity mask) and, on the main
// thread, reads /proc/self/maps: once per thread, out of line.
[[gnu::noinline, gnu::cold]] void look_up_bounds() noexcept {
  // pthread_getattr_np allocates, and this runs while a stack blob is being written in
  // place: a report of that allocation must not be appended into the middle of it.
  const collect::OwnWorkScope own_work;
  t_bounds.state = kLooking;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) {
    t_bounds.state = kFailed;
    return;
  }
  void* addr = nullptr;
  std::size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || addr == nullptr || size < 64) {
    t_bounds.state = kFailed;
    return;
  }
  t_bounds.lo = reinterpret_cast<std::uintptr_t>(addr);
  t_bounds.hi = t_bounds.lo + size;
  t_bounds.state = kReady;
}

// Writes frame words and places the module chain among them.
struct Emitter {
  std::uint64_t* out;
  std::size_t max;
  std::size_t n = 0;
  const internal::ModuleFrame* module = nullptr;  // next module to place (innermost first)
  std::size_t modules_left = 0;                   // room kept for them

  Emitter(std::uint64_t* o, std::size_t m, const internal::ModuleFrame* chain) noexcept
      : out(o), max(m), module(chain) {
    for (const internal::ModuleFrame* f = chain; f != nullptr && modules_left < max;
         f = f->parent) {
      if (f->stack_address != nullptr) ++modules_left;
    }
  }
  // Room for one more native frame, keeping room for the modules not placed yet.
  bool room_for_native() const noexcept { return n + modules_left < max; }
  // Places the modules whose scope lies below `bound` (they belong to the frame about to be
  // written, or to frames it called).
  void modules_below(std::uintptr_t bound) noexcept {
    for (; module != nullptr && modules_left > 0; module = module->parent) {
      if (module->stack_address == nullptr) continue;  // foreign: the provider places it
      if (reinterpret_cast<std::uintptr_t>(module->stack_address) >= bound) break;
      out[n++] = kLabelFrameBit | module->label_id;
      --modules_left;
    }
  }
  void native(std::uint64_t pc) noexcept { out[n++] = pc; }
  // The modules whose owners were not reached, at the outer end.
  std::size_t finish() noexcept {
    modules_below(UINTPTR_MAX);
    return n;
  }
};

// A plausible user-space return address: not null, not a label word, not a kernel address.
inline bool plausible_pc(std::uintptr_t pc) noexcept {
  return pc > 4096 && (pc & kLabelFrameBit) == 0;
}

struct DwarfWalk {
  Emitter* emitter;
  std::uintptr_t first;  // return address into capture_stack's caller: depth 0
  std::size_t skip;
  std::size_t depth = 0;
  bool found = false;
  std::uintptr_t pending = 0;  // a kept frame waiting for its CFA (see on_dwarf_frame)
};

// Called by _Unwind_Backtrace for each frame, innermost first. The context of a frame whose
// IP is in function F holds the CFA of F's callee (libgcc updates the CFA while unwinding
// out of a frame and the return address then points into the next), so F's own CFA, the
// upper end of its locals that places its modules, only arrives with the next frame: each
// kept frame waits in `pending` for one call.
_Unwind_Reason_Code on_dwarf_frame(_Unwind_Context* context, void* arg) {
  DwarfWalk& w = *static_cast<DwarfWalk*>(arg);
  const std::uintptr_t pc = _Unwind_GetIP(context);
  if (w.pending != 0) {
    w.emitter->modules_below(_Unwind_GetCFA(context));
    w.emitter->native(w.pending);
    w.pending = 0;
  }
  if (!w.found) {
    // Frames of this file (and of libgcc) until the caller of capture_stack; matching the
    // address rather than counting keeps skip right whatever was inlined or tail-called.
    if (pc != w.first) return _URC_NO_REASON;
    w.found = true;
  }
  if (!plausible_pc(pc)) return _URC_END_OF_STACK;
  if (w.depth++ < w.skip) return _URC_NO_REASON;
  if (!w.emitter->room_for_native()) return _URC_END_OF_STACK;
  w.pending = pc;
  return _URC_NO_REASON;
}

[[gnu::noinline]] void walk_dwarf(Emitter& emitter, std::uintptr_t first,
                                  std::size_t skip) noexcept {
  DwarfWalk walk{&emitter, first, skip};
  _Unwind_Backtrace(on_dwarf_frame, &walk);
  // The outermost frame (the thread's entry point) owns no module: the modules not placed
  // yet go after it, with the rest (Emitter::finish).
  if (walk.pending != 0) emitter.native(walk.pending);
}

}  // namespace

void set_foreign_stack_provider(ForeignStackProvider provider) noexcept {
  g_foreign_stack.store(provider, std::memory_order_release);
}

ForeignStackProvider foreign_stack_provider() noexcept {
  return g_foreign_stack.load(std::memory_order_acquire);
}

void set_unwinder(Unwinder u) noexcept {
  g_unwinder.store(static_cast<std::uint8_t>(u), std::memory_order_relaxed);
}

Unwinder unwinder_named(const char* value) noexcept {
  return value != nullptr && strcasecmp(value, "dwarf") == 0 ? Unwinder::kDwarf
                                                             : Unwinder::kFramePointers;
}

Unwinder unwinder() noexcept {
  std::uint8_t u = g_unwinder.load(std::memory_order_relaxed);
  if (u == 0xFF) [[unlikely]] {
    const auto chosen = static_cast<std::uint8_t>(unwinder_named(std::getenv("OPSCOPE_UNWINDER")));
    std::uint8_t expected = 0xFF;
    g_unwinder.compare_exchange_strong(expected, chosen, std::memory_order_relaxed);
    u = g_unwinder.load(std::memory_order_relaxed);
  }
  return static_cast<Unwinder>(u);
}

// Reads other frames' saved words: not instrumented, they are never poisoned and the reads
// are bounds-checked above.
[[gnu::noinline, gnu::no_sanitize_address]] std::size_t capture_stack(std::uint64_t* out,
                                                                      std::size_t max,
                                                                      std::size_t skip,
                                                                      bool with_modules) noexcept {
  if (max == 0) return 0;
  Emitter emitter(out, max, with_modules ? internal::t_module : nullptr);
  const auto first = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));

  if (unwinder() == Unwinder::kDwarf) [[unlikely]] {
    walk_dwarf(emitter, first, skip);
    return emitter.finish();
  }

  if (t_bounds.state != kReady) [[unlikely]] {
    if (t_bounds.state == kUnknown) look_up_bounds();
    if (t_bounds.state != kReady) return emitter.finish();  // kLooking: re-entered
  }
  const std::uintptr_t lo = t_bounds.lo;
  const std::uintptr_t top = t_bounds.hi - 2 * sizeof(std::uintptr_t);  // room for fp[0..1]
  constexpr std::uintptr_t kAlign = sizeof(std::uintptr_t) - 1;

  // This function's own frame (__builtin_frame_address forces it to have one): fp[1] is
  // the return address into our caller, depth 0.
  auto fp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  if (fp < lo || fp > top || (fp & kAlign) != 0) return emitter.finish();  // another stack
  for (std::size_t depth = 0;; ++depth) {
    const auto* frame = reinterpret_cast<const std::uintptr_t*>(fp);
    const std::uintptr_t next = frame[0];
    const std::uintptr_t pc = frame[1];
    if (!plausible_pc(pc)) break;
    const bool next_ok = next > fp && next <= top && (next & kAlign) == 0;
    if (depth >= skip) {
      if (!emitter.room_for_native()) break;
      // The function `pc` is in keeps its locals below its own frame pointer, `next`. When
      // the chain ends here its frame is the outermost we know: the rest of the stack.
      std::uintptr_t bound = next_ok ? next : t_bounds.hi;
#if defined(__aarch64__)
      // GCC on AArch64 puts the frame record at the bottom of a frame, locals above it: the
      // function's locals end at its caller's frame pointer. (Not exercised by the tests,
      // which run on x86-64.)
      if (next_ok) {
        const std::uintptr_t outer = reinterpret_cast<const std::uintptr_t*>(next)[0];
        bound = outer > next && outer <= top ? outer : t_bounds.hi;
      }
#endif
      emitter.modules_below(bound);
      emitter.native(pc);
    }
    if (!next_ok) break;
    fp = next;
  }
  return emitter.finish();
}

}  // namespace opscope::record
