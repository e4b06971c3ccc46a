// Per-thread buffers: registration, chunks, the byte limit, and draining.
#include "collect/collector.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include "opscope/internal/clock.h"
#include "util/thread_start.h"

namespace opscope {
namespace internal {

constinit thread_local ThreadContext t_ctx __attribute__((tls_model(OPSCOPE_TLS_MODEL))) = {};
std::atomic<std::uint32_t> g_state{0};
std::atomic<std::uint32_t> g_lenses{0};

}  // namespace internal

namespace collect {
namespace {

using internal::Chunk;
using internal::Record;
using internal::t_ctx;
using internal::ThreadContext;

// Depth of the collector's slow paths on this thread (see in_slow_path() in collector.h).
// Trivial and initial-exec: an allocator hook reads it from inside malloc.
constinit thread_local int t_slow_depth __attribute__((tls_model(OPSCOPE_TLS_MODEL))) = 0;

// Marks the calling thread as inside a slow path for its lifetime; nests.
class SlowPathScope {
 public:
  SlowPathScope() noexcept { ++t_slow_depth; }
  ~SlowPathScope() { --t_slow_depth; }
  SlowPathScope(const SlowPathScope&) = delete;
  SlowPathScope& operator=(const SlowPathScope&) = delete;
};

// One thread's buffer. The owning thread writes records without a lock; `mu` guards the
// chunk list, the epoch and `exited` against the drainer.
struct ThreadBuffer {
  std::mutex mu;
  std::vector<Chunk*> chunks;
  std::uint32_t epoch = 0;
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint64_t> dropped_ranges{0};  // of `dropped`, the ends of ranges
  // The owning thread's range id counter (ThreadContext::next_id) while it lives; its value
  // when the thread joined `epoch`, and when it exited. Their difference is the number of
  // ranges the thread began in the epoch.
  std::uint32_t* next_range_id = nullptr;
  std::uint32_t first_range_id = 0;
  std::uint32_t exit_range_id = 0;
  std::uint64_t tid = 0;
  std::string name;
  bool named = false;  // `name` came from the name hook: the OS name does not replace it
  std::uint16_t slot = 0;
  bool exited = false;

  ~ThreadBuffer();
};

// Chunk memory. Large chunks are mapped with their pages populated (one system call instead
// of a page fault every 256 compact ranges). Fresh pages are the dominant cost of a busy range (the
// kernel's work for them costs more per range than the range itself), so chunks are pooled:
// - While a window may record (a Profiler holds the claim), a background thread keeps
//   kReserveChunks mapped ahead of demand, off the recording threads. Two are enough: a chunk
//   holds 131,070 ranges (about 2.4 ms of back-to-back ranges), mapping one takes about
//   0.7 ms here, and chunks mapped ahead but never written are page work a first window pays
//   for nothing (with four, its process CPU per range was about 0.02 x two TSC reads more).
// - Chunks a window no longer needs go back to the pool, up to kPoolCapChunks, and stay there
//   across windows and Profilers: the next window of a similar size touches no fresh page.
// - Once nothing records for kPoolIdleRelease, the refill thread unmaps the pool and exits, so
//   a program that profiled once does not keep the memory.
// Measured in bench/RESULTS.md (first_window_bench).
inline constexpr std::size_t kReserveChunks = 2;    // 4 MiB mapped ahead while profiling
inline constexpr std::size_t kPoolCapChunks = 128;  // 256 MiB kept at most between windows
inline constexpr std::chrono::milliseconds kPoolIdleRelease{10'000};

struct ChunkPool {
  std::mutex mu;
  std::condition_variable wake;  // the refill thread waits here
  std::vector<Chunk*> chunks;
  bool enabled = false;     // a window may record: refill ahead
  bool thread_running = false;  // the refill thread lives; chunks returned are kept
  std::uint64_t generation = 0;  // bumped by each set_chunk_pooling: restarts the idle wait
  std::chrono::milliseconds idle_release = kPoolIdleRelease;
};

ChunkPool& make_pool() {
  static ChunkPool* p = new ChunkPool;  // never destroyed, like the registry
  // A child of fork() has no refill thread: it starts its own when it profiles, and must not
  // inherit the pool's lock held by the parent's.
  pthread_atfork([] { p->mu.lock(); }, [] { p->mu.unlock(); },
                 [] {
                   p->thread_running = false;
                   p->enabled = false;
                   p->mu.unlock();
                 });
  return *p;
}

ChunkPool& pool() {
  static ChunkPool& p = make_pool();
  return p;
}

void* map_populated(std::size_t bytes) noexcept {
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return mem == MAP_FAILED ? nullptr : mem;
}

void free_chunk(Chunk* c) noexcept {
  const std::size_t bytes = c->bytes;
  c->~Chunk();
  if (bytes == kFirstChunkBytes) {
    ::operator delete(static_cast<void*>(c), std::align_val_t(64));
  } else {
    ::munmap(c, bytes);
  }
}

// Returns nullptr when out of memory.
Chunk* new_chunk(std::size_t bytes) noexcept {
  SlowPathScope slow;
  void* mem = nullptr;
  if (bytes == kLargeChunkBytes) {
    ChunkPool& p = pool();
    std::unique_lock<std::mutex> lock(p.mu);
    if (!p.chunks.empty()) {
      Chunk* c = p.chunks.back();
      p.chunks.pop_back();
      const bool low = p.enabled && p.chunks.size() < kReserveChunks;
      lock.unlock();
      if (low) p.wake.notify_one();
      c->published.store(c->slots(), std::memory_order_relaxed);
      return c;
    }
  }
  if (bytes == kFirstChunkBytes) {
    mem = ::operator new(bytes, std::align_val_t(64), std::nothrow);
  } else {
    mem = map_populated(bytes);
  }
  if (mem == nullptr) return nullptr;
  auto* c = new (mem) Chunk;
  c->published.store(c->slots(), std::memory_order_relaxed);
  c->limit = c->slots() + (bytes - sizeof(Chunk)) / sizeof(internal::Slot);
  c->bytes = bytes;
  return c;
}

// Returns a chunk nobody writes any more: to the pool while it keeps chunks and has room,
// else to the OS.
void release_chunk(Chunk* c) noexcept {
  SlowPathScope slow;
  if (c->bytes == kLargeChunkBytes) {
    ChunkPool& p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.thread_running && p.chunks.size() < kPoolCapChunks) {
      try {
        p.chunks.push_back(c);
        return;
      } catch (...) {
      }
    }
  }
  free_chunk(c);
}

// The pool's thread: keeps kReserveChunks large chunks mapped while a window may record, and
// unmaps the pool and exits once nothing has recorded for the idle period.
void refill_loop() {
  // All this thread allocates is opscope's own, made while it may hold the pool's lock.
  SlowPathScope slow;
  ChunkPool& p = pool();
  pthread_setname_np(pthread_self(), "opscope-refill");
  std::unique_lock<std::mutex> lock(p.mu);
  while (true) {
    if (!p.enabled) {
      const std::uint64_t generation = p.generation;
      const bool woken = p.wake.wait_for(lock, p.idle_release,
                                         [&] { return p.generation != generation; });
      if (woken) continue;
      break;  // idle for the whole period
    }
    if (p.chunks.size() >= kReserveChunks) {
      p.wake.wait(lock);
      continue;
    }
    lock.unlock();
    void* mem = map_populated(kLargeChunkBytes);
    Chunk* c = nullptr;
    if (mem != nullptr) {
      c = new (mem) Chunk;
      c->limit = c->slots() + (kLargeChunkBytes - sizeof(Chunk)) / sizeof(internal::Slot);
      c->bytes = kLargeChunkBytes;
    }
    lock.lock();
    if (c == nullptr) {
      // Out of memory: recording threads map their own, or drop. Wait for the next change.
      const std::uint64_t generation = p.generation;
      p.wake.wait(lock, [&] { return p.generation != generation; });
      continue;
    }
    p.chunks.push_back(c);
  }
  std::vector<Chunk*> idle;
  idle.swap(p.chunks);
  p.thread_running = false;
  lock.unlock();
  for (Chunk* c : idle) free_chunk(c);
}

ThreadBuffer::~ThreadBuffer() {
  for (Chunk* c : chunks) release_chunk(c);
}

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // live and exited-but-undrained
  std::vector<std::uint16_t> free_slots;
  std::uint16_t next_slot = 1;  // slot 0 means "not registered"
  std::vector<std::uint64_t> tid_by_slot = std::vector<std::uint64_t>(1, 0);
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may exit after main returns
  return *r;
}

std::atomic<ThreadNameHook> g_name_hook{nullptr};
std::atomic<std::uint64_t> g_bytes{0};           // bytes charged in the current epoch
std::atomic<std::uint64_t> g_limit{1ull << 30};  // the current epoch's limit
std::atomic<std::uint32_t> g_last_epoch{0};

// Owns the thread's reference to its buffer and marks it exited when the thread ends.
struct ThreadHook {
  std::shared_ptr<ThreadBuffer> buffer;
  ~ThreadHook() {
    if (!buffer) return;
    ThreadContext& c = t_ctx;
    c.exiting = true;
    c.cur = c.end = nullptr;
    c.epoch = 0;
    std::lock_guard<std::mutex> lock(buffer->mu);
    buffer->exit_range_id = c.next_id;
    buffer->exited = true;
  }
};
thread_local ThreadHook t_hook;

std::string thread_name(std::uint64_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

void register_thread(ThreadContext& c, bool use_name_hook = true) {
  SlowPathScope slow;
  auto buffer = std::make_shared<ThreadBuffer>();
  buffer->tid = current_tid();
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) buffer->name = name;
  if (const ThreadNameHook hook = g_name_hook.load(std::memory_order_acquire);
      hook != nullptr && use_name_hook) {
    buffer->named = hook(&buffer->name);
  }
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    std::uint16_t slot;
    if (!r.free_slots.empty()) {
      slot = r.free_slots.back();
      r.free_slots.pop_back();
    } else {
      slot = r.next_slot++;
      r.tid_by_slot.push_back(0);
    }
    buffer->slot = slot;
    buffer->next_range_id = &c.next_id;
    r.tid_by_slot[slot] = buffer->tid;
    r.buffers.push_back(buffer);
  }
  c.slot = buffer->slot;
  c.registered = true;
  t_hook.buffer = std::move(buffer);
}

// Grants `bytes` more buffer against the epoch's byte limit, or refuses.
bool charge(std::size_t bytes) {
  std::uint64_t used = g_bytes.load(std::memory_order_relaxed);
  const std::uint64_t limit = g_limit.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit) return false;
  } while (!g_bytes.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

// Makes `chunk` the one the calling thread writes into, from its start. Its base tick is now:
// the compact ranges written into it begin after it (ranges that began earlier take a Record).
void write_into(ThreadContext& c, Chunk* chunk) noexcept {
  chunk->base_ticks = internal::ticks();
  chunk->published.store(chunk->slots(), std::memory_order_release);
  c.chunk = chunk;
  c.cur = chunk->slots();
  c.end = chunk->limit - 1;  // see ThreadContext::end
}

// The slots left in the calling thread's chunk (0 without one).
std::size_t slots_left(const ThreadContext& c) noexcept {
  return c.chunk == nullptr || c.cur == nullptr ? 0
                                                : static_cast<std::size_t>(c.chunk->limit - c.cur);
}

void update_state(std::uint32_t keep_mask, std::uint32_t set) noexcept {
  std::uint32_t old = internal::g_state.load(std::memory_order_relaxed);
  while (!internal::g_state.compare_exchange_weak(old, (old & keep_mask) | set,
                                                  std::memory_order_acq_rel)) {
  }
}

}  // namespace

void name_this_thread() noexcept {
  ThreadContext& c = t_ctx;
  if (c.exiting) return;
  if (!c.registered) {
    ensure_registered();
    return;
  }
  const ThreadNameHook hook = g_name_hook.load(std::memory_order_acquire);
  ThreadBuffer* b = t_hook.buffer.get();
  // `named` is written only by its own thread (here and at registration): read without the lock,
  // which guards it for the collecting thread.
  if (hook == nullptr || b == nullptr || b->named) return;
  SlowPathScope slow;
  try {
    std::string name;
    if (!hook(&name)) return;
    std::lock_guard<std::mutex> lock(b->mu);
    b->name = std::move(name);
    b->named = true;
  } catch (...) {  // no memory for the name: the OS name stays
  }
}

void set_thread_name_hook(ThreadNameHook hook) noexcept {
  g_name_hook.store(hook, std::memory_order_release);
}

std::optional<SlotThread> thread_of_slot(std::uint16_t slot) {
  std::shared_ptr<ThreadBuffer> found;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& b : r.buffers) {
      if (b->slot == slot) found = b;
    }
  }
  if (!found) return std::nullopt;
  std::lock_guard<std::mutex> lock(found->mu);
  SlotThread out{found->tid, found->name};
  if (!found->named && !found->exited) {
    if (std::string fresh = thread_name(found->tid); !fresh.empty()) out.name = std::move(fresh);
  }
  return out;
}

std::uint64_t current_tid() noexcept { return static_cast<std::uint64_t>(::syscall(SYS_gettid)); }

std::uint64_t tid_of_slot(std::uint16_t slot) noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return slot < r.tid_by_slot.size() ? r.tid_by_slot[slot] : 0;
}

void set_state_flag(std::uint32_t flag, bool on) noexcept {
  const std::uint32_t keep = ~flag;
  update_state(keep, on ? flag : 0);
}

std::uint16_t ensure_registered(bool from_allocator) noexcept {
  ThreadContext& c = t_ctx;
  if (c.registered) return c.slot;
  if (c.exiting) return 0;
  try {
    register_thread(c, !from_allocator);
  } catch (...) {
    return 0;
  }
  return c.slot;
}

void set_chunk_pooling(bool on) noexcept {
  SlowPathScope slow;
  ChunkPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.enabled == on) return;
  p.enabled = on;
  ++p.generation;
  if (on && !p.thread_running) {
    try {
      util::start_thread_beside(refill_loop).detach();
      p.thread_running = true;
    } catch (...) {
      // No thread: recording threads map chunks themselves, and nothing is kept.
    }
  }
  p.wake.notify_all();
}

void set_chunk_pool_idle_release(std::chrono::milliseconds idle) noexcept {
  ChunkPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.idle_release = idle;
  ++p.generation;
  p.wake.notify_all();
}

std::uint64_t pooled_chunk_bytes() noexcept {
  ChunkPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.chunks.size() * kLargeChunkBytes;
}

void set_thread_membership(std::uint32_t epoch) noexcept { t_ctx.member_epoch = epoch; }
std::uint32_t thread_membership() noexcept { return t_ctx.member_epoch; }

bool in_slow_path() noexcept { return t_slow_depth != 0; }

void begin_own_work() noexcept { ++t_slow_depth; }
void end_own_work() noexcept { --t_slow_depth; }

std::uint32_t begin_epoch(const EpochOptions& options) {
  std::uint32_t epoch = g_last_epoch.load() + 1;
  if (epoch >= (1u << 24)) epoch = 1;  // the epoch has 24 bits in g_state
  g_last_epoch.store(epoch);
  g_bytes.store(0, std::memory_order_relaxed);
  g_limit.store(options.buffer_limit_bytes, std::memory_order_relaxed);
  std::uint32_t flag = options.record_all_threads ? internal::kStateRecordAllThreads
                                                  : internal::kStateRecordSomeThreads;
  // Lenses that need work at every range begin send ranges to the slow path; memory reports
  // only need g_lenses.
  constexpr std::uint32_t kPerRange =
      internal::kLensShapes | internal::kLensStack | internal::kLensFlops | internal::kLensModules;
  if (options.lenses & kPerRange) flag |= internal::kStateLenses;
  internal::g_lenses.store(options.lenses, std::memory_order_relaxed);
  update_state(internal::kStateCallbacks, (epoch << 8) | flag);
  return epoch;
}

void end_epoch() {
  update_state(internal::kStateCallbacks, 0);
  internal::g_lenses.store(0, std::memory_order_relaxed);
}

// What a Drained reads: full chunks taken from live threads, and the buffers of exited
// threads (whose destructor returns their chunks).
class ChunkHold {
 public:
  std::vector<Chunk*> chunks;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  ~ChunkHold() {
    for (Chunk* c : chunks) release_chunk(c);
  }
};

Drained::Drained() = default;
Drained::Drained(Drained&&) noexcept = default;
Drained& Drained::operator=(Drained&&) noexcept = default;
Drained::~Drained() = default;

Drained drain(std::uint32_t epoch) {
  SlowPathScope slow;
  Drained out;
  out.hold = std::make_unique<ChunkHold>();
  Registry& r = registry();
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    buffers = r.buffers;
  }
  std::vector<ThreadBuffer*> released;
  for (const auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->epoch == epoch) {
      ThreadRecords t;
      t.slot = b->slot;
      t.tid = b->tid;
      if (!b->exited && !b->named) {
        std::string fresh = thread_name(b->tid);
        if (!fresh.empty()) b->name = std::move(fresh);
      }
      t.name = b->name;
      t.chunks.reserve(b->chunks.size());
      for (Chunk* c : b->chunks) {
        const internal::Slot* end = c->published.load(std::memory_order_acquire);
        if (end != c->slots()) {
          t.chunks.push_back({std::span<const internal::Slot>(c->slots(), end), c->base_ticks});
        }
      }
      // Every chunk but the last is full and never written again, even by a range still
      // ending late into this epoch: the Drained returns them once read, rather than the
      // thread when it next records, which may be never.
      if (b->chunks.size() > 1) {
        out.hold->chunks.insert(out.hold->chunks.end(), b->chunks.begin(), b->chunks.end() - 1);
        b->chunks.erase(b->chunks.begin(), b->chunks.end() - 1);
      }
      t.dropped = b->dropped.load(std::memory_order_relaxed);
      out.dropped += t.dropped;
      out.range_ends_dropped += b->dropped_ranges.load(std::memory_order_relaxed);
      // Read after the records: a range whose end was copied above began before this read
      // (its id was taken before its end was published), so it is counted here too.
      const std::uint32_t next_id =
          b->exited
              ? b->exit_range_id
              : std::atomic_ref<std::uint32_t>(*b->next_range_id).load(std::memory_order_relaxed);
      out.ranges_begun += static_cast<std::uint32_t>(next_id - b->first_range_id);
      if (!t.chunks.empty() || t.dropped != 0) out.threads.push_back(std::move(t));
    }
    if (b->exited) {
      released.push_back(b.get());
      out.hold->buffers.push_back(b);  // its chunks stay mapped while the Drained reads them
    }
  }
  out.buffer_bytes = g_bytes.load(std::memory_order_relaxed);
  if (!released.empty()) {
    std::lock_guard<std::mutex> lock(r.mu);
    std::erase_if(r.buffers, [&](const std::shared_ptr<ThreadBuffer>& b) {
      if (std::find(released.begin(), released.end(), b.get()) == released.end()) return false;
      r.free_slots.push_back(b->slot);
      r.tid_by_slot[b->slot] = 0;
      return true;
    });
  }
  return out;
}

}  // namespace collect

namespace internal {

bool prepare_thread(std::uint32_t epoch) noexcept {
  collect::SlowPathScope slow;
  ThreadContext& c = t_ctx;
  if (c.exiting) return false;
  if (epoch_of(g_state.load(std::memory_order_acquire)) != epoch) return false;
  try {
    if (!c.registered) collect::register_thread(c);
    collect::ThreadBuffer& b = *collect::t_hook.buffer;
    std::lock_guard<std::mutex> lock(b.mu);
    b.epoch = epoch;
    b.dropped.store(0, std::memory_order_relaxed);
    b.dropped_ranges.store(0, std::memory_order_relaxed);
    b.first_range_id = c.next_id;
    c.epoch = epoch;
    // No buffer until one is granted below: every early way out leaves the thread in the
    // epoch with nothing to write into, so its ranges are dropped and counted.
    c.chunk = nullptr;
    c.cur = c.end = nullptr;
    // The first chunk is charged like any other: past the byte limit the thread joins the
    // epoch without a buffer, so that what it records is dropped and counted (append_slow
    // finds no room and next_chunk is refused), and no memory is held for it. Thousands of
    // short-lived threads thus stay within the limit.
    std::size_t first_bytes = b.chunks.empty() ? collect::kFirstChunkBytes : b.chunks.back()->bytes;
    if (!collect::charge(first_bytes)) {
      // The chunk kept from an earlier epoch may be a large one: try a small one instead.
      for (Chunk* chunk : b.chunks) collect::release_chunk(chunk);
      b.chunks.clear();
      first_bytes = collect::kFirstChunkBytes;
      if (!collect::charge(first_bytes)) return true;
    }
    if (b.chunks.empty()) {
      Chunk* first = collect::new_chunk(collect::kFirstChunkBytes);
      if (first == nullptr) {
        collect::g_bytes.fetch_sub(first_bytes, std::memory_order_relaxed);
        return true;  // out of memory: recorded ranges are dropped and counted
      }
      b.chunks.push_back(first);
    }
    // Keep the chunk the thread wrote last (the others are full), return the rest: a thread
    // that recorded a lot once does not hold that memory forever.
    for (std::size_t i = 0; i + 1 < b.chunks.size(); ++i) collect::release_chunk(b.chunks[i]);
    b.chunks.erase(b.chunks.begin(), b.chunks.end() - 1);
    collect::write_into(c, b.chunks[0]);
    return true;
  } catch (...) {
    return false;  // out of memory: this thread does not record
  }
}

namespace {

// Moves the calling thread to a fresh chunk charged against the byte limit. Near the limit it
// falls back to a small chunk so the last bytes of the budget still hold events. Returns false
// when the limit (or memory) refuses.
bool next_chunk(ThreadContext& c) noexcept {
  collect::SlowPathScope slow;
  collect::ThreadBuffer& b = *collect::t_hook.buffer;
  Chunk* fresh = nullptr;
  for (std::size_t bytes : {collect::kLargeChunkBytes, collect::kFirstChunkBytes}) {
    if (!collect::charge(bytes)) continue;
    fresh = collect::new_chunk(bytes);
    if (fresh != nullptr) break;
    collect::g_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }
  if (fresh == nullptr) return false;
  try {
    std::lock_guard<std::mutex> lock(b.mu);
    b.chunks.push_back(fresh);
  } catch (...) {
    collect::release_chunk(fresh);
    return false;
  }
  collect::write_into(c, fresh);
  return true;
}

}  // namespace

void append_slow(const Record& record, std::uint32_t epoch) noexcept {
  ThreadContext& c = t_ctx;
  if (c.exiting) return;
  if (c.epoch != epoch && !prepare_thread(epoch)) return;  // a stale range: drop silently
  if (c.cur >= c.end && !next_chunk(c)) {
    collect::ThreadBuffer& b = *collect::t_hook.buffer;
    b.dropped.fetch_add(1, std::memory_order_relaxed);
    if (record.kind == static_cast<std::uint8_t>(RecordKind::kRange)) {
      b.dropped_ranges.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  *reinterpret_cast<Record*>(c.cur) = record;
  c.cur += kRecordSlots;
  c.chunk->published.store(c.cur, std::memory_order_release);
}

std::byte* reserve_blob_slow(std::size_t bytes, std::uint32_t epoch) noexcept {
  ThreadContext& c = t_ctx;
  if (c.exiting) return nullptr;
  if (c.epoch != epoch && !prepare_thread(epoch)) return nullptr;
  const std::size_t n = blob_slots(bytes);
  // A blob never spans chunks: when it does not fit, the rest of this chunk stays unused (a
  // blob is at most a few KiB; a large chunk holds 2 MiB).
  if (collect::slots_left(c) < n) {
    if (!next_chunk(c) || collect::slots_left(c) < n) {
      collect::t_hook.buffer->dropped.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
  }
  return reinterpret_cast<std::byte*>(c.cur + kRecordSlots);
}

bool append_blob(Record header, const void* payload, std::size_t bytes,
                 std::uint32_t epoch) noexcept {
  std::byte* out = reserve_blob(bytes, epoch);
  if (out == nullptr) return false;
  if (bytes != 0) std::memcpy(out, payload, bytes);
  header.end = bytes;
  *blob_header() = header;
  publish_blob(bytes);
  return true;
}

}  // namespace internal
}  // namespace opscope
