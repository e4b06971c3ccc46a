// Fresh memory, written soon: asking the kernel for its pages in one call, or on a second core.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

namespace opscope::util {

// Makes the kernel map the pages of [begin, begin + bytes) for writing now, in one call
// (MADV_POPULATE_WRITE), instead of a page fault per 4 KiB page as they are first written:
// on the project's VM that is 12-15 ns per 32 bytes instead of 19 (bench/RESULTS.md). For
// large buffers about to be filled; does nothing below 1 MiB, and nothing where the kernel
// (Linux < 5.14) does not know the call: the pages then fault in as before.
void populate_for_writing(void* begin, std::size_t bytes) noexcept;

// Gives the whole pages inside [begin, begin + bytes) back to the kernel (MADV_DONTNEED): for
// the unused end of a large buffer whose pages were mapped ahead. Reading them afterwards gives
// zeros. Does nothing below 1 MiB.
void release_pages(void* begin, std::size_t bytes) noexcept;

// The pages of a large buffer about to be written front to back, mapped from its end toward
// its start by a thread of its own, 2 MiB at a time, while the writer faults in the pages it
// reaches first. They meet about the middle: the kernel's work for fresh pages, most of what
// the first stop() of a process costs, is shared between two cores (on the project's VM one
// core maps 1 GB in 0.33 s, two in 0.17-0.23 s: bench/RESULTS.md). The pages' contents are not
// changed: mapping a page that was written already leaves it as it is.
class FreshPages {
 public:
  // Starts the thread; nullptr (nothing started) below 8 MiB, with one core, where the kernel
  // does not know MADV_POPULATE_WRITE, or when no thread can be made: the pages then fault in
  // as they are written.
  static std::unique_ptr<FreshPages> start(void* begin, std::size_t bytes);
  // Stops the thread before its next step and waits for it: before the buffer is freed or
  // moved.
  ~FreshPages();
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;

  // Once the writer is done, `written_end` the end of what it wrote: stops the thread and
  // gives back the pages it mapped past that end (release_pages), so that a reservation
  // larger than what fills it costs no memory.
  void stop_and_release(const void* written_end) noexcept;

 private:
  FreshPages(std::uintptr_t first, std::uintptr_t last) : first_(first), last_(last) {}
  void run() noexcept;
  void stop() noexcept;

  std::uintptr_t first_;  // the whole pages of the buffer: [first_, last_)
  std::uintptr_t last_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace opscope::util
