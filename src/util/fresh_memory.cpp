#include "util/fresh_memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <system_error>

#include "util/thread_start.h"

namespace opscope::util {
namespace {

std::uintptr_t page_size() {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// The whole pages inside [begin, begin + bytes): the partial ones at its ends may hold other
// data. first >= last when there are none.
struct PageRange {
  std::uintptr_t first;
  std::uintptr_t last;
};

PageRange whole_pages(void* begin, std::size_t bytes) {
  const std::uintptr_t page = page_size();
  const auto at = reinterpret_cast<std::uintptr_t>(begin);
  return {(at + page - 1) & ~(page - 1), (at + bytes) & ~(page - 1)};
}

}  // namespace

void FreshPages::run() noexcept {
  pthread_setname_np(pthread_self(), "opscope-pages");
#ifdef MADV_POPULATE_WRITE
  constexpr std::uintptr_t kStep = std::uintptr_t{2} << 20;
  for (std::uintptr_t end = last_; end > first_ && !stop_.load(std::memory_order_relaxed);) {
    const std::uintptr_t begin = end - first_ > kStep ? end - kStep : first_;
    // Pages the writer reached first are present already: the kernel passes over them.
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0) {
      return;  // out of memory: the writer's pages fault in
    }
    end = begin;
  }
#endif
}

void FreshPages::stop() noexcept {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

FreshPages::~FreshPages() { stop(); }

void FreshPages::stop_and_release(const void* written_end) noexcept {
  stop();
  const auto from = reinterpret_cast<std::uintptr_t>(written_end);
  if (from < last_) release_pages(reinterpret_cast<void*>(from), last_ - from);
}

std::unique_ptr<FreshPages> FreshPages::start(void* begin, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  // Below this a thread's start is not repaid (2 MiB takes about 0.7 ms to map here).
  constexpr std::size_t kWorthIt = std::size_t{8} << 20;
  if (bytes < kWorthIt || std::thread::hardware_concurrency() < 2) return nullptr;
  const PageRange pages = whole_pages(begin, bytes);
  try {
    std::unique_ptr<FreshPages> fresh(new FreshPages(pages.first, pages.last));
    FreshPages* raw = fresh.get();  // not movable: the thread keeps this address
    fresh->thread_ = start_thread_beside([raw] { raw->run(); });
    return fresh;
  } catch (const std::system_error&) {
    return nullptr;  // no thread could be made
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
#else
  (void)begin;
  (void)bytes;
  return nullptr;
#endif
}

void populate_for_writing(void* begin, std::size_t bytes) noexcept {
  constexpr std::size_t kWorthIt = 1 << 20;
  if (bytes < kWorthIt) return;
#ifdef MADV_POPULATE_WRITE
  const PageRange pages = whole_pages(begin, bytes);
  if (pages.last > pages.first) {
    ::madvise(reinterpret_cast<void*>(pages.first), pages.last - pages.first, MADV_POPULATE_WRITE);
  }
#else
  (void)begin;
#endif
}

void release_pages(void* begin, std::size_t bytes) noexcept {
  constexpr std::size_t kWorthIt = 1 << 20;
  if (bytes < kWorthIt) return;
  const PageRange pages = whole_pages(begin, bytes);
  if (pages.last > pages.first) {
    ::madvise(reinterpret_cast<void*>(pages.first), pages.last - pages.first, MADV_DONTNEED);
  }
}

}  // namespace opscope::util
