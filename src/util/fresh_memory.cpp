#include "util/fresh_memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <system_error>
#include <thread>

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

// What the thread works on: the pages [first, last), and whether it should stop.
struct FreshPages::Shared {
  std::uintptr_t first = 0;
  std::uintptr_t last = 0;
  std::atomic<bool> stop{false};
  std::thread thread;

  void run() {
    pthread_setname_np(pthread_self(), "opscope-pages");
#ifdef MADV_POPULATE_WRITE
    constexpr std::uintptr_t kStep = std::uintptr_t{2} << 20;
    for (std::uintptr_t end = last; end > first && !stop.load(std::memory_order_relaxed);) {
      const std::uintptr_t begin = end - first > kStep ? end - kStep : first;
      // Pages the writer reached first are present already: the kernel passes over them.
      if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0) {
        return;  // out of memory: the writer's pages fault in
      }
      end = begin;
    }
#endif
  }
};

FreshPages::FreshPages(std::unique_ptr<Shared> shared) : shared_(std::move(shared)) {}

FreshPages::~FreshPages() {
  shared_->stop.store(true, std::memory_order_relaxed);
  shared_->thread.join();
}

std::unique_ptr<FreshPages> FreshPages::start(void* begin, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  // Below this a thread's start is not repaid (2 MiB takes about 0.7 ms to map here).
  constexpr std::size_t kWorthIt = std::size_t{8} << 20;
  if (bytes < kWorthIt || std::thread::hardware_concurrency() < 2) return nullptr;
  const PageRange pages = whole_pages(begin, bytes);
  try {
    auto shared = std::make_unique<Shared>();
    shared->first = pages.first;
    shared->last = pages.last;
    Shared* raw = shared.get();
    shared->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<FreshPages>(new FreshPages(std::move(shared)));
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
