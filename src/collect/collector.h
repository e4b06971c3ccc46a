// The collector's control plane: opening and closing a recording epoch and draining every
// thread's buffer. The hot path is in include/opscope/internal/collector.h.
//
// Threading: begin_epoch, end_epoch and drain are called by the session layer under its own
// lock, never concurrently with each other. Recording threads never block on them: they only
// take their own buffer's mutex, in slow paths (new chunk, new epoch).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "opscope/internal/collector.h"

namespace opscope::collect {

// A thread's first chunk is small (64 KiB, 2047 ranges) so that a thread that records a
// little costs little; once it fills one, it gets large chunks (2 MiB, 65535 ranges) mapped on
// a huge-page boundary. Fresh memory is the dominant cost of a busy range: with 4 KiB pages
// the kernel faults every 128 ranges, with a transparent huge page once per chunk.
inline constexpr std::size_t kFirstChunkBytes = 64 * 1024;
inline constexpr std::size_t kLargeChunkBytes = 2 * 1024 * 1024;

struct EpochOptions {
  std::uint64_t buffer_limit_bytes = 1ull << 30;
  bool record_all_threads = true;
  std::uint32_t lenses = 0;  // internal::kLens* bits
};

// Opens a new epoch and makes ranges record into it. Returns the epoch (never 0).
std::uint32_t begin_epoch(const EpochOptions& options);

// Stops recording: ranges that begin from now on are not recorded. Ranges already running
// still end into their buffers, which drain() may or may not see.
void end_epoch();

// The records of one chunk, in the slots of opscope/internal/collector.h, and the tick its
// compact ranges' starts count from.
struct ChunkSlots {
  std::span<const internal::Slot> slots;
  std::uint64_t base_ticks = 0;
};

// What one thread recorded in an epoch: its records in the order they ended, read in place
// in the thread's chunks (one span per chunk; a blob never straddles two), valid while the
// Drained that holds them lives.
struct ThreadRecords {
  std::uint16_t slot = 0;
  std::uint64_t tid = 0;
  std::string name;
  std::vector<ChunkSlots> chunks;
  std::uint64_t dropped = 0;

  // The slots of all chunks: at least the number of records.
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& c : chunks) n += c.slots.size();
    return n;
  }
};

class ChunkHold;  // the chunks a Drained reads, returned to the pool when it is destroyed

struct Drained {
  Drained();
  Drained(Drained&&) noexcept;
  Drained& operator=(Drained&&) noexcept;
  ~Drained();

  std::vector<ThreadRecords> threads;
  std::uint64_t dropped = 0;
  std::uint64_t buffer_bytes = 0;
  // Ranges the epoch's threads began in it (ids taken with take_range_id), and of `dropped`
  // the records that would have ended one. Begun minus ended minus these is the number of
  // ranges still open when the epoch was drained.
  std::uint64_t ranges_begun = 0;
  std::uint64_t range_ends_dropped = 0;
  std::unique_ptr<ChunkHold> hold;
};

// Hands out everything published for `epoch`, including threads that have exited since,
// without copying it: the Drained holds the chunks it points into (the full ones leave their
// threads now, exited threads' buffers leave the registry) and returns them to the pool when
// it is destroyed. Only each live thread's last chunk stays with its thread, which may still
// append to it (after what was published, which the Drained does not read).
Drained drain(std::uint32_t epoch);

// On while a window may record (the session turns it on while a Profiler or the legacy
// profiler holds the claim): a background thread maps chunks ahead of the recording threads.
// Chunks windows no longer need are kept for later windows (256 MiB at most), on or off,
// until nothing has recorded for the idle period (10 s): then they are unmapped.
void set_chunk_pooling(bool on) noexcept;
// The idle period after which the pool is unmapped (for tests; 10 s by default).
void set_chunk_pool_idle_release(std::chrono::milliseconds idle) noexcept;
// Bytes of chunk memory the pool holds right now (mapped, not in any thread's buffer).
std::uint64_t pooled_chunk_bytes() noexcept;

// The flight recorder's ring: an epoch that records every thread into a fixed region of
// kRingChunkBytes chunks and, once the region is used up, reuses the chunk sealed longest
// ago, so its memory never passes `max_bytes` however many threads come and go. A thread's
// chunk is sealed when it is full, when the thread exits, and when a window's epoch begins
// (a window pauses the ring: begin_epoch() stops ring recording, end_epoch() resumes it in a
// new epoch). The hot path is the same as a window's: the ring only changes the slow paths.
inline constexpr std::size_t kRingChunkBytes = kFirstChunkBytes;
inline constexpr std::uint64_t kRingMinBytes = 4 * kRingChunkBytes;

struct RingOptions {
  std::uint64_t max_bytes = 64ull << 20;  // rounded down to whole chunks, at least kRingMinBytes
  std::uint32_t lenses = 0;               // internal::kLens* bits
};

// Maps the region and starts recording into it (paused while a window's epoch is open).
// Throws opscope::Error when a ring runs already or the region cannot be mapped.
void start_ring(const RingOptions& options);
// Stops recording into the ring. The region's pages go back to the system; the mapping stays
// (a range still open on some thread may end into it later) and is never reused.
void stop_ring() noexcept;
bool ring_running() noexcept;

// What the ring holds and has lost, at a copy.
struct RingStats {
  std::uint64_t capacity_bytes = 0;  // the region
  std::uint64_t used_bytes = 0;      // chunks ever handed out (never more than the region)
  std::uint64_t chunks_overwritten = 0;
  std::uint64_t records_overwritten =
      0;                      // slots of records in the chunks reused (a blob counts its slots)
  std::uint64_t dropped = 0;  // records refused: no chunk to write into
  std::uint32_t lenses = 0;
  // Spans (ticks) in which windows paused the ring; the last one's end is 0 while it lasts.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> paused;
};

// A copy of everything the ring holds, made while threads go on recording: per thread, its
// chunks in the order it wrote them. Each chunk is copied under the ring's lock, so a thread
// that needs a new chunk waits at most one chunk's copy. Empty (no threads) when no ring runs.
struct RingCopy {
  std::vector<ThreadRecords> threads;
  std::vector<std::unique_ptr<internal::Slot[]>> storage;  // what `threads` point into
  RingStats stats;
};
RingCopy copy_ring();
// The ranges open on every live thread right now (kept while the ring records, see
// internal::OpenRange), innermost last per thread.
struct OpenRangeCopy {
  std::uint64_t tid = 0;
  std::uint16_t slot = 0;
  std::string thread_name;
  internal::OpenRange range{};
};
std::vector<OpenRangeCopy> copy_open_ranges();

// Lets the ring record again after a window's epoch ended and its records were drained (a
// thread that joined the ring before the drain would leave the window's records unread).
// Does nothing when no ring runs or another epoch is open.
void resume_ring() noexcept;

// Thread-limited sessions: marks the calling thread as recorded in `epoch` (0 = none).
void set_thread_membership(std::uint32_t epoch) noexcept;
std::uint32_t thread_membership() noexcept;

// Registers the calling thread if it is not yet (so that its range handles are unique) and
// returns its slot, or 0 when the thread is exiting or out of memory. `from_allocator`: the
// call comes from an allocation report, maybe inside malloc, where the name hook (which may
// run Python code) must not run; the thread keeps its OS name.
std::uint16_t ensure_registered(bool from_allocator = false) noexcept;

// Whether the calling thread is inside one of the collector's slow paths (registering,
// taking or returning a chunk, a new epoch, a drain) or is the collector's own refill thread.
// Those allocate while they hold a buffer's or the pool's lock with the thread's cursor half
// updated, so an allocation report made from there must be dropped, not recorded: recording
// it would re-enter the collector and deadlock on that lock. One TLS read; safe inside malloc.
bool in_slow_path() noexcept;

// Marks the calling thread as doing opscope's own work for its lifetime, like a slow path:
// allocation reports made meanwhile are dropped. Taken around whatever allocates while a
// blob is written in place (reserve_blob ... publish_blob), so that no report is appended
// into the middle of the blob: a thread's first stack capture looking up its stack bounds,
// Python frames interning their labels. Nests.
// begin_own_work() and end_own_work() are the same, unscoped, in pairs.
void begin_own_work() noexcept;
void end_own_work() noexcept;
class OwnWorkScope {
 public:
  OwnWorkScope() noexcept { begin_own_work(); }
  ~OwnWorkScope() { end_own_work(); }
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;
};

// OS id of the calling thread.
std::uint64_t current_tid() noexcept;
// OS id of the thread registered in `slot`, or 0.
std::uint64_t tid_of_slot(std::uint16_t slot) noexcept;
// The thread registered in `slot`, as results show it: its OS id and the name the name hook
// gave it, else its OS name (/proc comm, fresh while it lives); nullopt when the slot is free.
struct SlotThread {
  std::uint64_t tid = 0;
  std::string name;
};
std::optional<SlotThread> thread_of_slot(std::uint16_t slot);

// Names the calling thread for results, or leaves `name` alone (returns false). Called once per
// thread, when it registers (its first recorded range, mark or report), in a slow path: it
// must not record or take locks another recording thread may hold. The Python extension
// installs one that gives a thread holding the GIL its `threading` name.
using ThreadNameHook = bool (*)(std::string* name);
void set_thread_name_hook(ThreadNameHook hook) noexcept;
// Registers the calling thread now, named by the hook, or names it if it registered without
// one: a thread whose first record was an allocation report registers unnamed, since the hook
// may not run inside an allocator. For a caller that knows the hook can run here (the Python
// extension, holding the GIL, before a session starts on the thread).
void name_this_thread() noexcept;

// Sets or clears state flags other than the session's (the record layer's kStateCallbacks).
void set_state_flag(std::uint32_t flag, bool on) noexcept;

}  // namespace opscope::collect
