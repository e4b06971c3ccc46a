// Per-thread buffers: registration, chunks, the byte limit, and draining.
#include "collect/collector.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <tuple>

#include "collect/raw_dump.h"
#include "opscope/error.h"
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
  // The flight recorder's chunk the thread writes (or last wrote) into, apart from `chunks`
  // (a window's, which a Drained may still read): set while ring_generation is the ring's.
  Chunk* ring_chunk = nullptr;
  std::uint64_t ring_generation = 0;
  // The owning thread's context, for its open ranges: read under `mu` while !exited.
  const ThreadContext* context = nullptr;

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
  bool enabled = false;          // a window may record: refill ahead
  bool thread_running = false;   // the refill thread lives; chunks returned are kept
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
      const bool woken =
          p.wake.wait_for(lock, p.idle_release, [&] { return p.generation != generation; });
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

// The flight recorder's ring (start_ring in collector.h). One region of `count` chunks of
// kRingChunkBytes, mapped without populating (a chunk's pages are touched when it is first
// handed out), and a descriptor per chunk. Guarded by `mu`, which is taken before any
// ThreadBuffer's `mu`; the hot path never takes it.
enum RingChunkState : std::uint32_t { kRingFree = 0, kRingCurrent = 1, kRingSealed = 2 };

struct RingChunkInfo {
  std::atomic<std::uint32_t> state{kRingFree};
  std::uint64_t use = 0;  // which handing out of the chunk this is (unique, increasing)
  std::uint64_t tid = 0;
  std::uint16_t slot = 0;
  char name[48] = {};
};

struct Ring {
  std::mutex mu;
  bool running = false;
  std::byte* region = nullptr;
  std::size_t count = 0;  // chunks in the region
  std::unique_ptr<RingChunkInfo[]> info;
  std::size_t fresh = 0;              // chunks [fresh, count) were never handed out
  std::vector<std::uint32_t> free;    // chunks handed back unused
  std::vector<std::uint32_t> sealed;  // a queue of `count` places: oldest at sealed_head
  std::size_t sealed_head = 0;
  std::size_t sealed_size = 0;
  std::uint64_t next_use = 1;
  std::uint64_t generation = 0;  // bumped by each start: tells a thread's old ring chunk apart
  std::uint32_t lenses = 0;
  std::uint64_t chunks_overwritten = 0;
  std::uint64_t records_overwritten = 0;
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint32_t> epoch{0};  // the ring epoch recording now; 0 when paused or off
  std::vector<std::pair<std::uint64_t, std::uint64_t>> paused;
};

Ring& make_ring() {
  static Ring* g = new Ring;  // never destroyed: threads may exit after main returns
  // A child of fork() must not inherit the lock held by another of its parent's threads.
  pthread_atfork([] { g->mu.lock(); }, [] { g->mu.unlock(); }, [] { g->mu.unlock(); });
  return *g;
}

Ring& ring() {
  static Ring& g = make_ring();
  return g;
}

Chunk* ring_chunk_at(const Ring& g, std::size_t index) noexcept {
  return reinterpret_cast<Chunk*>(g.region + index * kRingChunkBytes);
}

std::size_t ring_index_of(const Ring& g, const Chunk* c) noexcept {
  return static_cast<std::size_t>(reinterpret_cast<const std::byte*>(c) - g.region) /
         kRingChunkBytes;
}

std::size_t used_slots(const Chunk* c) noexcept {
  Chunk* mutable_c = const_cast<Chunk*>(c);
  return static_cast<std::size_t>(c->published.load(std::memory_order_acquire) -
                                  mutable_c->slots());
}

// Hands the ring chunk `b` writes into back to the ring: sealed when it holds records, free
// when it holds none; forgotten when it belongs to a ring stopped since. Ring and buffer locked.
void ring_detach(Ring& g, ThreadBuffer& b) noexcept {
  Chunk* c = b.ring_chunk;
  const bool current = c != nullptr && g.running && b.ring_generation == g.generation;
  b.ring_chunk = nullptr;
  b.ring_generation = 0;
  if (!current) return;
  const std::size_t index = ring_index_of(g, c);
  RingChunkInfo& info = g.info[index];
  if (used_slots(c) == 0) {
    info.state.store(kRingFree, std::memory_order_release);
    g.free.push_back(static_cast<std::uint32_t>(index));  // capacity reserved: no allocation
    return;
  }
  info.state.store(kRingSealed, std::memory_order_release);
  g.sealed[(g.sealed_head + g.sealed_size) % g.count] = static_cast<std::uint32_t>(index);
  ++g.sealed_size;
}

// Gives `b` a ring chunk to write into: one never used, one handed back, else the chunk
// sealed longest ago (its records are overwritten). nullptr when every chunk is some live
// thread's current one. Ring and buffer locked.
Chunk* ring_attach(Ring& g, ThreadBuffer& b) noexcept {
  std::size_t index;
  if (!g.free.empty()) {
    index = g.free.back();
    g.free.pop_back();
  } else if (g.fresh < g.count) {
    index = g.fresh++;
  } else if (g.sealed_size != 0) {
    index = g.sealed[g.sealed_head];
    g.sealed_head = (g.sealed_head + 1) % g.count;
    --g.sealed_size;
    ++g.chunks_overwritten;
    g.records_overwritten += used_slots(ring_chunk_at(g, index));
  } else {
    return nullptr;
  }
  Chunk* c = ring_chunk_at(g, index);
  if (g.info[index].use == 0) {
    new (c) Chunk;
    c->limit = c->slots() + (kRingChunkBytes - sizeof(Chunk)) / sizeof(internal::Slot);
    c->bytes = kRingChunkBytes;
  }
  c->base_ticks = internal::ticks();
  c->published.store(c->slots(), std::memory_order_release);
  RingChunkInfo& info = g.info[index];
  info.use = g.next_use++;
  info.tid = b.tid;
  info.slot = b.slot;
  const std::size_t n = std::min(b.name.size(), sizeof info.name - 1);
  std::memcpy(info.name, b.name.data(), n);
  info.name[n] = '\0';
  info.state.store(kRingCurrent, std::memory_order_release);
  b.ring_chunk = c;
  b.ring_generation = g.generation;
  return c;
}

// Counts a record the ring had no room for, when `epoch` is the ring's.
void count_ring_drop(std::uint32_t epoch) noexcept {
  Ring& g = ring();
  if (epoch != 0 && epoch == g.epoch.load(std::memory_order_relaxed)) {
    g.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

// Takes an exited thread's buffer out of the registry and frees its slot.
void forget_buffer(const ThreadBuffer& gone) noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto it =
      std::find_if(r.buffers.begin(), r.buffers.end(),
                   [&](const std::shared_ptr<ThreadBuffer>& b) { return b.get() == &gone; });
  if (it == r.buffers.end()) return;
  try {
    r.free_slots.push_back(gone.slot);
  } catch (...) {
    return;  // no memory for the free list: the buffer stays, and a drain frees it
  }
  r.tid_by_slot[gone.slot] = 0;
  r.buffers.erase(it);
}

// Owns the thread's reference to its buffer and marks it exited when the thread ends.
struct ThreadHook {
  std::shared_ptr<ThreadBuffer> buffer;
  ~ThreadHook() {
    if (!buffer) return;
    ThreadContext& c = t_ctx;
    c.exiting = true;
    c.cur = c.end = nullptr;
    c.epoch = 0;
    bool forget = false;
    {
      Ring& g = ring();
      std::lock_guard<std::mutex> ring_lock(g.mu);
      std::lock_guard<std::mutex> lock(buffer->mu);
      buffer->exit_range_id = c.next_id;
      buffer->exited = true;
      // Its last ring chunk is sealed, so that the thread's last ranges stay in the ring
      // until they are the oldest.
      ring_detach(g, *buffer);
      // A thread that recorded into the ring last has nothing a window will drain (the ring
      // resumes only after a window's drain): its buffer leaves the registry now, so that
      // threads coming and going under the flight recorder do not pile up.
      forget = buffer->epoch != 0 && buffer->epoch == g.epoch.load(std::memory_order_relaxed);
    }
    if (forget) forget_buffer(*buffer);
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
    buffer->context = &c;
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

namespace {

std::uint32_t next_epoch() noexcept {
  std::uint32_t epoch = g_last_epoch.load() + 1;
  if (epoch >= (1u << 24)) epoch = 1;  // the epoch has 24 bits in g_state
  g_last_epoch.store(epoch);
  return epoch;
}

// The g_state flags of an epoch that records with `lenses`.
std::uint32_t lens_flags(std::uint32_t lenses) noexcept {
  // Lenses that need work at every range begin send ranges to the slow path; memory reports
  // only need g_lenses.
  constexpr std::uint32_t kPerRange =
      internal::kLensShapes | internal::kLensStack | internal::kLensFlops | internal::kLensModules;
  return (lenses & kPerRange) != 0 ? internal::kStateLenses : 0;
}

// Makes ranges record into the ring, in a new epoch. Ring locked, no window open.
void open_ring_epoch(Ring& g) noexcept {
  const std::uint32_t epoch = next_epoch();
  g.epoch.store(epoch, std::memory_order_relaxed);
  internal::g_lenses.store(g.lenses, std::memory_order_relaxed);
  update_state(internal::kStateCallbacks, (epoch << 8) | internal::kStateRecordAllThreads |
                                              internal::kStateRing | lens_flags(g.lenses));
}

// Stops ranges recording into the ring (a window opens, or the ring stops). Ring locked.
void close_ring_epoch(Ring& g) noexcept {
  if (g.epoch.load(std::memory_order_relaxed) == 0) return;
  g.epoch.store(0, std::memory_order_relaxed);
  update_state(internal::kStateCallbacks, 0);
  internal::g_lenses.store(0, std::memory_order_relaxed);
}

}  // namespace

std::uint32_t begin_epoch(const EpochOptions& options) {
  SlowPathScope slow;  // the pause's note allocates under the ring's lock
  Ring& g = ring();
  std::lock_guard<std::mutex> ring_lock(g.mu);
  if (g.running && g.epoch.load(std::memory_order_relaxed) != 0) {
    close_ring_epoch(g);  // a window pauses the flight recorder
    try {
      g.paused.emplace_back(internal::ticks(), 0);
    } catch (...) {
    }
  }
  const std::uint32_t epoch = next_epoch();
  g_bytes.store(0, std::memory_order_relaxed);
  g_limit.store(options.buffer_limit_bytes, std::memory_order_relaxed);
  std::uint32_t flag = options.record_all_threads ? internal::kStateRecordAllThreads
                                                  : internal::kStateRecordSomeThreads;
  flag |= lens_flags(options.lenses);
  internal::g_lenses.store(options.lenses, std::memory_order_relaxed);
  update_state(internal::kStateCallbacks, (epoch << 8) | flag);
  return epoch;
}

void end_epoch() {
  update_state(internal::kStateCallbacks, 0);
  internal::g_lenses.store(0, std::memory_order_relaxed);
}

void resume_ring() noexcept {
  SlowPathScope slow;
  Ring& g = ring();
  std::lock_guard<std::mutex> ring_lock(g.mu);
  if (!g.running || g.epoch.load(std::memory_order_relaxed) != 0) return;
  if (internal::epoch_of(internal::g_state.load(std::memory_order_acquire)) != 0) return;
  if (!g.paused.empty() && g.paused.back().second == 0) g.paused.back().second = internal::ticks();
  open_ring_epoch(g);
}

void start_ring(const RingOptions& options) {
  SlowPathScope slow;
  Ring& g = ring();
  std::lock_guard<std::mutex> ring_lock(g.mu);
  if (g.running) {
    throw Error("FlightRecorder::start()",
                "a flight recorder is already recording in this process (one at a time)");
  }
  const std::size_t count = options.max_bytes / kRingChunkBytes;
  if (options.max_bytes < kRingMinBytes) {
    throw Error("FlightRecorder::start()",
                "max_bytes " + std::to_string(options.max_bytes) + " is below the least a " +
                    "flight recorder needs, " + std::to_string(kRingMinBytes) + " (" +
                    std::to_string(kRingMinBytes / kRingChunkBytes) + " chunks of " +
                    std::to_string(kRingChunkBytes / 1024) + " KiB)");
  }
  void* region = ::mmap(nullptr, count * kRingChunkBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) {
    throw Error("FlightRecorder::start()",
                "cannot map " + std::to_string(count * kRingChunkBytes) +
                    " bytes for the flight recorder: " + std::strerror(errno));
  }
  // The region's pages are made now, on huge pages where the system gives them: a thread
  // writing into a chunk for the first time would otherwise fault its pages in on its own
  // time (Python ranges cost 1.6 times a window's until the ring had wrapped once,
  // bench/python_bench.py), and the region is the recorder's bound whether filled or not.
  ::madvise(region, count * kRingChunkBytes, MADV_HUGEPAGE);
  for (std::size_t at = 0; at < count * kRingChunkBytes; at += 4096) {
    static_cast<volatile unsigned char*>(region)[at] = 0;
  }
  // A region is never unmapped (see stop_ring), so the vectors' memory is the only thing
  // that can fail from here: made before the ring changes.
  auto info = std::make_unique<RingChunkInfo[]>(count);
  std::vector<std::uint32_t> free_list;
  free_list.reserve(count);
  std::vector<std::uint32_t> sealed(count, 0);
  g.region = static_cast<std::byte*>(region);
  g.count = count;
  g.info = std::move(info);
  g.free = std::move(free_list);
  g.sealed = std::move(sealed);
  g.fresh = 0;
  g.sealed_head = g.sealed_size = 0;
  g.next_use = 1;
  ++g.generation;
  g.lenses = options.lenses;
  g.chunks_overwritten = g.records_overwritten = 0;
  g.dropped.store(0, std::memory_order_relaxed);
  g.paused.clear();
  g.running = true;
  if (internal::epoch_of(internal::g_state.load(std::memory_order_acquire)) == 0) {
    open_ring_epoch(g);
  } else {
    g.paused.emplace_back(internal::ticks(), 0);  // a window records: the ring starts paused
  }
}

void stop_ring() noexcept {
  SlowPathScope slow;
  Ring& g = ring();
  std::lock_guard<std::mutex> ring_lock(g.mu);
  if (!g.running) return;
  close_ring_epoch(g);
  g.running = false;
  // A range begun in the ring's epoch may still end into its chunk on some thread: the pages
  // go back, the mapping stays valid (and unused) for such late writes.
  ::madvise(g.region, g.count * kRingChunkBytes, MADV_DONTNEED);
  g.region = nullptr;
  g.count = 0;
  g.info.reset();
  std::vector<std::uint32_t>().swap(g.free);
  std::vector<std::uint32_t>().swap(g.sealed);
  g.sealed_size = 0;
}

bool ring_running() noexcept {
  Ring& g = ring();
  std::lock_guard<std::mutex> ring_lock(g.mu);
  return g.running;
}

RingCopy copy_ring() {
  SlowPathScope slow;
  RingCopy out;
  Ring& g = ring();
  constexpr std::size_t kChunkSlots = (kRingChunkBytes - sizeof(Chunk)) / sizeof(internal::Slot);
  struct Piece {
    std::uint64_t use = 0;
    std::uint64_t tid = 0;
    std::uint16_t slot = 0;
    std::string name;
    std::uint64_t base_ticks = 0;
    std::size_t slots = 0;
    std::size_t storage = 0;
  };
  std::vector<Piece> pieces;
  std::vector<std::uint64_t> copied;  // the uses copied, so that none is copied twice
  std::uint64_t generation = 0;
  std::uint64_t newest_listed = 0;

  // The sealed chunks whose use is above `after`, oldest first. Ring locked.
  const auto list_sealed = [&](std::uint64_t after) {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> list;
    list.reserve(g.sealed_size);
    for (std::size_t i = 0; i < g.sealed_size; ++i) {
      const std::uint32_t index = g.sealed[(g.sealed_head + i) % g.count];
      if (g.info[index].use > after) list.emplace_back(index, g.info[index].use);
    }
    return list;
  };
  // Copies the published records of ring chunk `index` into new storage. Ring locked.
  const auto copy = [&](std::uint32_t index, std::unique_ptr<internal::Slot[]>& to, Piece p) {
    const Chunk* c = ring_chunk_at(g, index);
    p.slots = used_slots(c);
    p.base_ticks = c->base_ticks;
    p.use = g.info[index].use;
    if (p.slots == 0) return;
    std::memcpy(to.get(), const_cast<Chunk*>(c)->slots(), p.slots * sizeof(internal::Slot));
    p.storage = out.storage.size();
    out.storage.push_back(std::move(to));
    copied.push_back(p.use);
    pieces.push_back(std::move(p));
  };
  const auto copy_sealed = [&](const std::vector<std::pair<std::uint32_t, std::uint64_t>>& list) {
    for (const auto& [index, use] : list) {
      if (std::find(copied.begin(), copied.end(), use) != copied.end()) continue;
      auto storage = std::make_unique<internal::Slot[]>(kChunkSlots);
      std::lock_guard<std::mutex> ring_lock(g.mu);
      if (!g.running || g.generation != generation) return;
      const RingChunkInfo& info = g.info[index];
      if (info.state.load(std::memory_order_relaxed) != kRingSealed || info.use != use) {
        continue;  // overwritten since it was listed
      }
      Piece p;
      p.tid = info.tid;
      p.slot = info.slot;
      p.name = info.name;
      copy(index, storage, std::move(p));
    }
  };

  std::vector<std::pair<std::uint32_t, std::uint64_t>> sealed;
  {
    std::lock_guard<std::mutex> ring_lock(g.mu);
    if (!g.running) return out;
    generation = g.generation;
    sealed = list_sealed(0);
    for (const auto& entry : sealed) newest_listed = std::max(newest_listed, entry.second);
  }
  copy_sealed(sealed);
  // The chunks live threads write into now.
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    buffers = r.buffers;
  }
  for (const auto& b : buffers) {
    auto storage = std::make_unique<internal::Slot[]>(kChunkSlots);
    std::lock_guard<std::mutex> ring_lock(g.mu);
    if (!g.running || g.generation != generation) break;
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->ring_chunk == nullptr || b->ring_generation != generation) continue;
    Piece p;
    p.tid = b->tid;
    p.slot = b->slot;
    p.name = b->name;
    copy(static_cast<std::uint32_t>(ring_index_of(g, b->ring_chunk)), storage, std::move(p));
  }
  // Chunks sealed while the others were copied (a live thread's, copied above or not).
  {
    std::lock_guard<std::mutex> ring_lock(g.mu);
    if (g.running && g.generation == generation) sealed = list_sealed(newest_listed);
  }
  copy_sealed(sealed);
  {
    std::lock_guard<std::mutex> ring_lock(g.mu);
    out.stats.capacity_bytes = g.count * kRingChunkBytes;
    out.stats.used_bytes = std::min(g.count, g.fresh) * kRingChunkBytes;
    out.stats.chunks_overwritten = g.chunks_overwritten;
    out.stats.records_overwritten = g.records_overwritten;
    out.stats.dropped = g.dropped.load(std::memory_order_relaxed);
    out.stats.lenses = g.lenses;
    out.stats.paused = g.paused;
  }

  // One ThreadRecords per thread, its chunks in the order it took them.
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.tid, a.slot, a.use) < std::tie(b.tid, b.slot, b.use);
  });
  for (Piece& p : pieces) {
    if (out.threads.empty() || out.threads.back().tid != p.tid ||
        out.threads.back().slot != p.slot) {
      ThreadRecords t;
      t.tid = p.tid;
      t.slot = p.slot;
      t.name = std::move(p.name);
      out.threads.push_back(std::move(t));
    }
    out.threads.back().chunks.push_back(
        {std::span<const internal::Slot>(out.storage[p.storage].get(), p.slots), p.base_ticks});
  }
  return out;
}

namespace raw {

// Both read the ring without its lock: from a signal handler, whose thread may hold it. The
// region and the descriptors stay allocated while the ring runs; what a racing thread writes
// meanwhile is read half old, half new, which the decoder tolerates.
bool ring_figures(RawHeader& header) noexcept {
  const Ring& g = ring();
  if (!g.running || g.region == nullptr) return false;
  header.capacity_bytes = g.count * kRingChunkBytes;
  header.used_bytes = std::min(g.count, g.fresh) * kRingChunkBytes;
  header.chunks_overwritten = g.chunks_overwritten;
  header.records_overwritten = g.records_overwritten;
  header.dropped = g.dropped.load(std::memory_order_relaxed);
  header.lenses = g.lenses;
  return true;
}

void write_ring_chunks(RawWriter& out) noexcept {
  const Ring& g = ring();
  if (!g.running || g.region == nullptr || !g.info) return;
  constexpr std::size_t kChunkSlots = (kRingChunkBytes - sizeof(Chunk)) / sizeof(internal::Slot);
  for (std::size_t i = 0; i < g.count; ++i) {
    const RingChunkInfo& info = g.info[i];
    if (info.state.load(std::memory_order_acquire) == kRingFree) continue;
    Chunk* c = ring_chunk_at(g, i);
    const internal::Slot* end = c->published.load(std::memory_order_acquire);
    const auto n = static_cast<std::size_t>(end - c->slots());
    if (end < c->slots() || n == 0 || n > kChunkSlots) continue;
    RawChunk head{};
    head.tid = info.tid;
    head.use = info.use;
    head.base_ticks = c->base_ticks;
    head.slot = info.slot;
    std::memcpy(head.name, info.name, sizeof head.name);
    head.name[sizeof head.name - 1] = '\0';
    out.section(Section::kChunk, sizeof head + n * sizeof(internal::Slot));
    out.put(&head, sizeof head);
    out.put(c->slots(), n * sizeof(internal::Slot));
  }
}

}  // namespace raw

std::vector<OpenRangeCopy> copy_open_ranges() {
  SlowPathScope slow;
  std::vector<OpenRangeCopy> out;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    buffers = r.buffers;
  }
  for (const auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->exited || b->context == nullptr) continue;  // its thread-local memory is gone
    const ThreadContext& c = *b->context;
    const std::uint32_t depth =
        std::min(std::atomic_ref<const std::uint32_t>(c.open_depth).load(std::memory_order_relaxed),
                 internal::kOpenRangeDepth);
    for (std::uint32_t i = 0; i < depth; ++i) {
      const internal::OpenRange& o = c.open[i];
      OpenRangeCopy copy;
      copy.tid = b->tid;
      copy.slot = b->slot;
      copy.thread_name = b->name;
      copy.range.start =
          std::atomic_ref<const std::uint64_t>(o.start).load(std::memory_order_relaxed);
      copy.range.name =
          std::atomic_ref<const std::uintptr_t>(o.name).load(std::memory_order_relaxed);
      copy.range.id = std::atomic_ref<const std::uint32_t>(o.id).load(std::memory_order_relaxed);
      copy.range.scope =
          std::atomic_ref<const std::uint8_t>(o.scope).load(std::memory_order_relaxed);
      copy.range.flags =
          std::atomic_ref<const std::uint8_t>(o.flags).load(std::memory_order_relaxed);
      out.push_back(std::move(copy));
    }
  }
  return out;
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
    collect::Ring& g = collect::ring();
    std::unique_lock<std::mutex> ring_lock(g.mu);
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
    // A ring chunk the thread wrote into before this epoch is sealed into the ring.
    collect::ring_detach(g, b);
    if (epoch == g.epoch.load(std::memory_order_relaxed)) {
      // The flight recorder's epoch: a ring chunk, never charged (the ring bounds itself);
      // the window chunks the thread keeps stay as they are, for its next window.
      if (Chunk* chunk = collect::ring_attach(g, b)) collect::write_into(c, chunk);
      return true;
    }
    ring_lock.unlock();
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

void pop_open_range_slow(ThreadContext& c, std::uint32_t id) noexcept {
  // Ended out of order: the entry is taken out wherever it is, the ones above move down.
  const std::uint32_t depth = std::min(c.open_depth, kOpenRangeDepth);
  for (std::uint32_t i = depth; i-- > 0;) {
    if (c.open[i].id != id) continue;
    for (std::uint32_t j = i; j + 1 < depth; ++j) {
      const OpenRange& from = c.open[j + 1];
      OpenRange& to = c.open[j];
      std::atomic_ref<std::uintptr_t>(to.name).store(from.name, std::memory_order_relaxed);
      std::atomic_ref<std::uint32_t>(to.id).store(from.id, std::memory_order_relaxed);
      std::atomic_ref<std::uint8_t>(to.scope).store(from.scope, std::memory_order_relaxed);
      std::atomic_ref<std::uint8_t>(to.flags).store(from.flags, std::memory_order_relaxed);
      std::atomic_ref<std::uint64_t>(to.start).store(from.start, std::memory_order_relaxed);
    }
    std::atomic_ref<std::uint32_t>(c.open_depth).store(c.open_depth - 1, std::memory_order_relaxed);
    return;
  }
}

namespace {

// Moves the calling thread to a fresh chunk charged against the byte limit. Near the limit it
// falls back to a small chunk so the last bytes of the budget still hold events. Returns false
// when the limit (or memory) refuses.
bool next_chunk(ThreadContext& c) noexcept {
  collect::SlowPathScope slow;
  collect::ThreadBuffer& b = *collect::t_hook.buffer;
  collect::Ring& g = collect::ring();
  // b.ring_chunk is written only by this thread: read without the lock.
  const bool in_ring_chunk = c.chunk != nullptr && c.chunk == b.ring_chunk;
  if (in_ring_chunk || c.epoch == g.epoch.load(std::memory_order_relaxed)) {
    // In the flight recorder's epoch: the full chunk is sealed and the ring gives another.
    std::lock_guard<std::mutex> ring_lock(g.mu);
    std::lock_guard<std::mutex> lock(b.mu);
    // A range of a ring epoch that has ended (a window paused it, or it stopped) is dropped.
    if (c.epoch != g.epoch.load(std::memory_order_relaxed)) return false;
    if (c.chunk != nullptr && !in_ring_chunk) return false;
    collect::ring_detach(g, b);
    c.chunk = nullptr;
    c.cur = c.end = nullptr;
    Chunk* chunk = collect::ring_attach(g, b);
    if (chunk == nullptr) return false;
    collect::write_into(c, chunk);
    return true;
  }
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
    collect::count_ring_drop(c.epoch);
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
      collect::count_ring_drop(c.epoch);
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
