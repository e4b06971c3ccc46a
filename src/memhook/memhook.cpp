// opscope::memhook: reports the process's own malloc/free and operator new/delete to a
// profile_memory session, with no change to the program's code.
//
//   target_link_libraries(app PRIVATE opscope::opscope opscope::memhook)
//   # or, for a program that exports opscope's symbols (opscope built shared, or the program
//   # linked with -rdynamic / ENABLE_EXPORTS):
//   LD_PRELOAD=libopscope_memhook.so ./app
//
// Every allocation function of the C library and every standard form of operator new/delete
// is replaced here and forwarded to glibc's own entry points (__libc_malloc, __libc_free,
// ...), which exist from the first instruction of the process: no dlsym(RTLD_NEXT) dance, no
// bootstrap allocator for calls made before this library is initialised.
//
// Cost. When no session records memory a hooked call costs what glibc's does plus one relaxed
// load of opscope's g_lenses (and a test of its address, see "Linking" below). While one
// records, each call also reads malloc_usable_size, updates one process-wide atomic total and
// appends one 64-byte record to the calling thread's buffer (bench/memory_bench.cpp).
//
// What is reported. Sizes are malloc_usable_size() of the block (what glibc really handed
// out, at least what was asked), the same number for a block's allocation and its free.
// realloc is a free of the old block and an allocation of the new one, even in place. The
// totals are kept by opscope (src/record/memory.cpp, report_hooked_memory):
//   Total Allocated = the heap in use when the window's first report came (glibc's own
//                     count, mallinfo2) plus every change reported since. A window's Bytes
//                     add up to its last total minus where it started, and a free of a block
//                     allocated before the window (shown as PREEXISTING by the memory
//                     timeline) lowers it without driving it negative.
//   Total Reserved  = Total Allocated. What glibc holds from the kernel takes every arena's
//                     lock to compute, far too slow to read per allocation.
// Everything the process allocates is reported, opscope's own allocations while recording
// included, except what opscope allocates in order to record (registering a thread, taking a
// chunk of buffer): opscope drops those reports itself rather than re-enter its own code.
//
// Linking. The library does not contain opscope: the program's copy must be the one that
// records (two copies would mean two sets of buffers, and the Profiler would never see the
// hook's). Its references to opscope are weak, so preloading it into a program without
// opscope, or one that does not export opscope's symbols, leaves it inert instead of failing
// to load. The references are bound when the library loads: an opscope that arrives later
// with dlopen (a Python extension module) is not seen, and the hook stays inert there.
// CMake's opscope::memhook target passes -u for the report function, so that linking it pulls
// that object out of libopscope.a and exports it to the hook.
#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>

#include "opscope/memory.h"
#include "record/hook_abi.h"

// glibc's allocator under its internal names. These are glibc's reserved identifiers, kept
// exported (GLIBC_2.2.5) precisely so that a replacement malloc can forward to them.
extern "C" {
void* __libc_malloc(std::size_t size);
void __libc_free(void* ptr);
void* __libc_calloc(std::size_t n, std::size_t size);
void* __libc_realloc(void* ptr, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void* __libc_valloc(std::size_t size);
void* __libc_pvalloc(std::size_t size);
}

// Weak redeclarations (see "Linking" above): their address is null when the program does not
// provide them.
namespace opscope::internal {
extern std::atomic<std::uint32_t> g_lenses __attribute__((weak));
void report_hooked_memory(const void* ptr, std::int64_t bytes) noexcept __attribute__((weak));
}  // namespace opscope::internal

namespace {

namespace oi = opscope::internal;

// The one test every hooked call makes. Re-entry (opscope allocating while it records a
// report) is opscope's to stop, in report_hooked_memory: this library keeps no state at all,
// not even a thread_local, so it can be preloaded anywhere.
inline bool enabled() noexcept {
  std::atomic<std::uint32_t>* lenses = &oi::g_lenses;
  return lenses != nullptr && (lenses->load(std::memory_order_relaxed) & oi::kLensMemory) != 0;
}

// Out of line: the fast path of every hooked call stays a load and a branch. errno is kept:
// recording may touch it (a thread's first report reads its name), and free() must not
// (POSIX 2024; glibc's does not), nor a malloc that succeeds.
[[gnu::noinline]] void report(const void* ptr, std::int64_t bytes) noexcept {
  if (oi::report_hooked_memory == nullptr) return;
  const int saved_errno = errno;
  oi::report_hooked_memory(ptr, bytes);
  errno = saved_errno;
}

inline void report_alloc(void* ptr) noexcept {
  if (ptr != nullptr && enabled()) [[unlikely]] {
    report(ptr, static_cast<std::int64_t>(malloc_usable_size(ptr)));
  }
}

// Called before the block goes back to glibc: afterwards another thread may get the same
// address and report its allocation before this free would be reported.
inline void report_free(void* ptr) noexcept {
  if (ptr != nullptr && enabled()) [[unlikely]] {
    report(ptr, -static_cast<std::int64_t>(malloc_usable_size(ptr)));
  }
}

inline void* hooked_malloc(std::size_t size) noexcept {
  void* p = __libc_malloc(size);
  report_alloc(p);
  return p;
}

inline void* hooked_memalign(std::size_t alignment, std::size_t size) noexcept {
  void* p = __libc_memalign(alignment, size);
  report_alloc(p);
  return p;
}

inline void hooked_free(void* ptr) noexcept {
  report_free(ptr);
  __libc_free(ptr);
}

// operator new's contract: retry through the new-handler, throw bad_alloc when there is none.
void* new_or_throw(std::size_t size, std::size_t alignment) {
  if (size == 0) size = 1;
  for (;;) {
    void* p = alignment <= alignof(std::max_align_t) ? __libc_malloc(size)
                                                     : __libc_memalign(alignment, size);
    if (p != nullptr) {
      report_alloc(p);
      return p;
    }
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* new_or_null(std::size_t size, std::size_t alignment) noexcept {
  try {
    return new_or_throw(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

// --- the C library's allocation functions ----------------------------------------------------

extern "C" {

__attribute__((visibility("default"))) void* malloc(std::size_t size) {
  return hooked_malloc(size);
}

__attribute__((visibility("default"))) void free(void* ptr) { hooked_free(ptr); }

// C23's sized frees (glibc 2.41 and later has them; defining them on an older glibc is
// harmless): a program that calls them must not bypass the hook.
__attribute__((visibility("default"))) void free_sized(void* ptr, std::size_t) { hooked_free(ptr); }

__attribute__((visibility("default"))) void free_aligned_sized(void* ptr, std::size_t,
                                                               std::size_t) {
  hooked_free(ptr);
}

__attribute__((visibility("default"))) void* calloc(std::size_t n, std::size_t size) {
  void* p = __libc_calloc(n, size);
  report_alloc(p);
  return p;
}

__attribute__((visibility("default"))) void* realloc(void* ptr, std::size_t size) {
  if (ptr == nullptr) return hooked_malloc(size);
  // The old block is reported freed before glibc may hand it to another thread (see
  // report_free); when realloc fails it is still ours and is reported allocated again.
  const bool on = enabled();
  const std::size_t old_size = on ? malloc_usable_size(ptr) : 0;
  if (on) report(ptr, -static_cast<std::int64_t>(old_size));
  void* p = __libc_realloc(ptr, size);
  if (p != nullptr) {
    report_alloc(p);
  } else if (size != 0 && on) {
    report(ptr, static_cast<std::int64_t>(old_size));  // failed: the old block lives on
  }
  return p;
}

__attribute__((visibility("default"))) void* reallocarray(void* ptr, std::size_t n,
                                                          std::size_t size) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(ptr, bytes);
}

__attribute__((visibility("default"))) int posix_memalign(void** out, std::size_t alignment,
                                                          std::size_t size) {
  // POSIX: a power of two multiple of sizeof(void*), else EINVAL (glibc's own check).
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  void* p = hooked_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

__attribute__((visibility("default"))) void* aligned_alloc(std::size_t alignment,
                                                           std::size_t size) {
  return hooked_memalign(alignment, size);
}

__attribute__((visibility("default"))) void* memalign(std::size_t alignment, std::size_t size) {
  return hooked_memalign(alignment, size);
}

__attribute__((visibility("default"))) void* valloc(std::size_t size) {
  void* p = __libc_valloc(size);
  report_alloc(p);
  return p;
}

__attribute__((visibility("default"))) void* pvalloc(std::size_t size) {
  void* p = __libc_pvalloc(size);
  report_alloc(p);
  return p;
}

}  // extern "C"

// --- operator new and delete, every standard form --------------------------------------------
// Replaced here too, not left to libstdc++'s (which call malloc): a program may be linked
// with a libstdc++ whose operator new does not go through the PLT to malloc.

#define OPSCOPE_MEMHOOK_API __attribute__((visibility("default")))

OPSCOPE_MEMHOOK_API void* operator new(std::size_t size) { return new_or_throw(size, 0); }
OPSCOPE_MEMHOOK_API void* operator new[](std::size_t size) { return new_or_throw(size, 0); }
OPSCOPE_MEMHOOK_API void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return new_or_null(size, 0);
}
OPSCOPE_MEMHOOK_API void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return new_or_null(size, 0);
}
OPSCOPE_MEMHOOK_API void* operator new(std::size_t size, std::align_val_t al) {
  return new_or_throw(size, static_cast<std::size_t>(al));
}
OPSCOPE_MEMHOOK_API void* operator new[](std::size_t size, std::align_val_t al) {
  return new_or_throw(size, static_cast<std::size_t>(al));
}
OPSCOPE_MEMHOOK_API void* operator new(std::size_t size, std::align_val_t al,
                                       const std::nothrow_t&) noexcept {
  return new_or_null(size, static_cast<std::size_t>(al));
}
OPSCOPE_MEMHOOK_API void* operator new[](std::size_t size, std::align_val_t al,
                                         const std::nothrow_t&) noexcept {
  return new_or_null(size, static_cast<std::size_t>(al));
}

OPSCOPE_MEMHOOK_API void operator delete(void* ptr) noexcept { hooked_free(ptr); }
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr) noexcept { hooked_free(ptr); }
OPSCOPE_MEMHOOK_API void operator delete(void* ptr, const std::nothrow_t&) noexcept {
  hooked_free(ptr);
}
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr, const std::nothrow_t&) noexcept {
  hooked_free(ptr);
}
// Sized forms: the size is what the caller asked for, the report uses the usable size so that
// allocation and free of one block always carry the same number.
OPSCOPE_MEMHOOK_API void operator delete(void* ptr, std::size_t) noexcept { hooked_free(ptr); }
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr, std::size_t) noexcept { hooked_free(ptr); }
OPSCOPE_MEMHOOK_API void operator delete(void* ptr, std::align_val_t) noexcept { hooked_free(ptr); }
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr, std::align_val_t) noexcept {
  hooked_free(ptr);
}
OPSCOPE_MEMHOOK_API void operator delete(void* ptr, std::align_val_t,
                                         const std::nothrow_t&) noexcept {
  hooked_free(ptr);
}
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr, std::align_val_t,
                                           const std::nothrow_t&) noexcept {
  hooked_free(ptr);
}
OPSCOPE_MEMHOOK_API void operator delete(void* ptr, std::size_t, std::align_val_t) noexcept {
  hooked_free(ptr);
}
OPSCOPE_MEMHOOK_API void operator delete[](void* ptr, std::size_t, std::align_val_t) noexcept {
  hooked_free(ptr);
}
