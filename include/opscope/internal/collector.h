// opscope/internal/collector.h: the per-thread event buffer as the hot path sees it. Not API.
//
// Each thread appends fixed-size records to chunks it owns. The thread's cursor lives in a
// trivial thread_local (no constructor, no destructor), so reaching it is one %fs-relative
// access with no TLS wrapper call. Everything else — registering the thread, taking a new
// chunk, counting drops when the session's byte limit is reached, switching to a new session —
// is in out-of-line slow paths in src/collect/collector.cpp.
//
// Publishing a record is one release store of the chunk's end pointer; the collector that
// drains the buffers at stop reads that pointer with acquire and copies what is before it.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "opscope/internal/tls.h"

namespace opscope::internal {

// What a record describes. The values reach no file, but keep them stable anyway: later
// lenses add kinds, they never renumber.
enum class RecordKind : std::uint8_t {
  kRange = 1,    // a RecordFunction: begin and end ticks
  kInstant = 2,  // a mark: start == end
  kLink = 3,     // side record of a range: start = sequence number, end = forward thread id
  // Blobs: a header record followed by ceil(end / 16) payload slots (see append_blob).
  // The header's (thread, id) names the range the blob belongs to; start is its tick.
  kInputs = 4,  // payload: the range's inputs, encoded by src/record/value_codec
  kStack = 5,   // payload: frame words, innermost first (see src/record/stack_capture.h)
  kMemory = 6,  // payload: MemoryPayload; name = address, scope = category, flags = action
  kFlops = 7,   // side record of a range: start = FLOPs stated by the caller
  kModule = 8,  // side record of a range: name = interned module path ("Model.Linear_0")
  // Side record of a range whose encoded inputs take at most 16 bytes (two small tensors, an
  // mm's): start then end hold the bytes, name their count. Half the memory of a kInputs blob.
  kInputsInline = 9,
  kCompactRange = 10,  // a range in one slot: see kCompactNameBits below
};

// Flags in Record::flags.
inline constexpr std::uint8_t kNameInterned = 1;  // Record::name is a StringTable id
inline constexpr std::uint8_t kNameSite = 0;      // Record::name is a `const CallSite*`

// A thread's buffer is a sequence of 16-byte slots. A record takes one slot (a compact range,
// below) or two (a Record), and a blob's payload follows its header in whole slots. The low
// four bits of byte 15 of a record's first slot hold its RecordKind in both layouts, so a
// reader knows from the first slot how many follow (both layouts assume a little-endian CPU).
static_assert(std::endian::native == std::endian::little, "the record layouts are little-endian");
struct alignas(16) Slot {
  std::uint64_t word[2];
};

// Every record but the compact range: 32 bytes, two slots. Everything optional lives in side
// records keyed by (thread, id), so a session without lenses pays nothing for them.
struct Record {
  std::uint64_t start;     // ticks
  std::uint32_t id;        // per-thread counter of the thread that began the range
  std::uint16_t thread;    // slot of the thread that began the range
  std::uint8_t scope;      // RecordScope
  std::uint8_t kind : 4;   // RecordKind: byte 15, as in a compact range
  std::uint8_t flags : 4;  // kNameInterned, ...
  std::uint64_t end;       // ticks
  std::uintptr_t name;     // const CallSite* or interned id, see flags
};
static_assert(sizeof(Record) == 2 * sizeof(Slot), "a range must stay within 32 bytes of buffer");
inline constexpr std::size_t kRecordSlots = sizeof(Record) / sizeof(Slot);

// A Record from its fields, for the call sites that build one whole.
constexpr Record make_record(std::uint64_t start, std::uint64_t end, std::uintptr_t name,
                             std::uint32_t id, std::uint16_t thread, std::uint8_t scope,
                             RecordKind kind, std::uint8_t flags) noexcept {
  Record r{};
  r.start = start;
  r.id = id;
  r.thread = thread;
  r.scope = scope;
  r.kind = static_cast<std::uint8_t>(kind) & 0xF;
  r.flags = flags & 0xF;
  r.end = end;
  r.name = name;
  return r;
}

// The common range in one slot: it began and ended on the thread whose buffer holds it,
// began in the current chunk's tick span (at most 2^32 ticks after the chunk's first, about
// 1.7 s at 2.5 GHz) and lasted under 2^32 ticks, and its name has a compact index below 2^23
// (a call site's CallSite::compact_index, or an interned id). Anything else is a Record. Half
// the bytes matter because in a program's first window each byte of buffer is fresh memory,
// which costs as much per range as the range itself (bench/RESULTS.md, first_window_bench).
//   word[0]: start - the chunk's base tick (bits 0..31), end - start (bits 32..63)
//   word[1]: id (bits 0..31), name index (32..54), interned (55), kind (56..59), scope (60..63)
inline constexpr std::uint32_t kCompactNameBits = 23;
inline constexpr std::uint32_t kCompactNameLimit = 1u << kCompactNameBits;
inline constexpr std::uint32_t kCompactInterned = 1u << kCompactNameBits;
// The upper half of word[1] of a compact range, from its name index, name kind and scope.
constexpr std::uint32_t compact_tag(std::uint32_t name_index, bool interned,
                                    std::uint8_t scope) noexcept {
  return name_index | (interned ? kCompactInterned : 0) |
         (static_cast<std::uint32_t>(RecordKind::kCompactRange) << 24) |
         (static_cast<std::uint32_t>(scope) << 28);
}

// The kind of the record whose first slot is `s` (read as a byte: the slot may hold a
// Record's fields).
inline RecordKind kind_of(const Slot& s) noexcept {
  return static_cast<RecordKind>(reinterpret_cast<const unsigned char*>(&s)[15] & 0xF);
}

// A chunk of a thread's buffer. Written only by its thread; `published` marks how far.
struct Chunk {
  std::atomic<Slot*> published;
  Slot* limit;
  std::uint64_t bytes;       // size of the allocation, header included
  std::uint64_t base_ticks;  // compact ranges' starts count from here (set when taken)
  // Slots follow, 32-byte aligned.
  Slot* slots() noexcept { return reinterpret_cast<Slot*>(this + 1); }
};
static_assert(sizeof(Chunk) == 32);

// A range begun on the thread and not yet ended, kept only while the flight recorder records
// (kStateRing), so that a dump can write the ranges still open. Written by the owning thread
// with relaxed atomic stores (plain moves), read by a dumping thread the same way: a dump
// that races a begin may read an entry half old, half new, and says open ranges are a
// best effort for threads that are running.
struct OpenRange {
  std::uint64_t start;  // ticks
  std::uintptr_t name;  // as Record::name
  std::uint32_t id;
  std::uint8_t scope;
  std::uint8_t flags;  // kNameInterned, ...
};
inline constexpr std::uint32_t kOpenRangeDepth = 32;  // deeper ranges are not kept

// The calling thread's cursor. Trivial so that the thread_local needs no guard.
struct ThreadContext {
  Slot* cur;  // next free slot in `chunk`
  // One slot before the end of `chunk`, so that cur < end means a whole Record fits (and a
  // compact range too); cur >= end sends appends to the slow path.
  Slot* end;
  Chunk* chunk;           // current chunk
  std::uint32_t epoch;    // session epoch the buffer holds; 0 = none
  std::uint32_t next_id;  // ids of the ranges this thread records (take_range_id)
  std::uint16_t slot;     // registry slot; valid once registered
  bool registered;
  bool exiting;                 // set by the thread-exit hook; no more recording on this thread
  std::uint32_t member_epoch;   // for thread-limited sessions: the epoch this thread joined
  void* thread_callbacks;       // record layer: this thread's observer list, or nullptr
  std::uint32_t next_other_id;  // ids of everything else with a handle (take_other_id)
  // The flight recorder's open ranges: open[0, open_depth) while it records (see OpenRange).
  std::uint32_t open_depth;
  OpenRange open[kOpenRangeDepth];
};

extern constinit thread_local ThreadContext t_ctx __attribute__((tls_model(OPSCOPE_TLS_MODEL)));

// The process-wide recording state, read with one relaxed load by every range.
//   bits 0..7  : flags below
//   bits 8..31 : epoch of the active session (0 when none)
// 0 means "nothing listens": a range then costs this load and a branch.
extern std::atomic<std::uint32_t> g_state;

inline constexpr std::uint32_t kStateRecordAllThreads = 1;   // session records every thread
inline constexpr std::uint32_t kStateRecordSomeThreads = 2;  // session records member threads
inline constexpr std::uint32_t kStateCallbacks = 4;          // some observer may be active
inline constexpr std::uint32_t kStateLenses = 8;  // the session asks ranges for more than times
inline constexpr std::uint32_t kStateRing = 16;   // the flight recorder records: keep open ranges
inline constexpr std::uint32_t kStateFlagMask = 0xFF;

// The lenses of the active session (0 when none), read by slow paths and by the memory report.
extern std::atomic<std::uint32_t> g_lenses;
inline constexpr std::uint32_t kLensShapes = 1;
inline constexpr std::uint32_t kLensMemory = 2;
inline constexpr std::uint32_t kLensStack = 4;
inline constexpr std::uint32_t kLensFlops = 8;
inline constexpr std::uint32_t kLensModules = 16;

inline std::uint32_t epoch_of(std::uint32_t state) noexcept { return state >> 8; }

// The id of a range the calling thread records: (slot, id) is the range's handle. Recorded
// ranges count their ids apart from everything else, so that the counter says how many began;
// drain() reads it (from another thread, hence the atomic access: relaxed, it compiles to the
// load and store of a plain increment) and the session subtracts the ranges that ended, to
// count those still open when the window stopped. After 2^31 ranges of one thread the ids
// reach the upper half; a window never holds that many (64 GiB of records).
inline std::uint32_t take_range_id(ThreadContext& c) noexcept {
  std::atomic_ref<std::uint32_t> next(c.next_id);
  const std::uint32_t id = next.load(std::memory_order_relaxed);
  next.store(id + 1, std::memory_order_relaxed);
  return id;
}

// The id of anything else with a handle: a mark, a memory report, a range that only observers
// watch. Taken from the upper half of the id space, so handles stay unique within a thread.
inline constexpr std::uint32_t kOtherIdBit = 0x80000000u;
inline std::uint32_t take_other_id(ThreadContext& c) noexcept {
  return kOtherIdBit | (c.next_other_id++ & ~kOtherIdBit);
}

// Notes a range the calling thread began at `start` as open (while the flight recorder
// records); pop_open_range() when it ends on the same thread.
inline void push_open_range(ThreadContext& c, std::uint64_t start, std::uintptr_t name,
                            std::uint32_t id, std::uint8_t scope, std::uint8_t flags) noexcept {
  const std::uint32_t depth = c.open_depth;
  if (depth < kOpenRangeDepth) [[likely]] {
    OpenRange& o = c.open[depth];
    std::atomic_ref<std::uintptr_t>(o.name).store(name, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(o.id).store(id, std::memory_order_relaxed);
    std::atomic_ref<std::uint8_t>(o.scope).store(scope, std::memory_order_relaxed);
    std::atomic_ref<std::uint8_t>(o.flags).store(flags, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(o.start).store(start, std::memory_order_relaxed);
  }
  std::atomic_ref<std::uint32_t>(c.open_depth).store(depth + 1, std::memory_order_relaxed);
}
// Removes range `id` from the calling thread's open ranges: the innermost one nearly always.
// A range that ends on another thread than the one that began it (slot `thread`) stays in
// its thread's entries; a dump finds it ended, when its end is still in the ring.
[[gnu::noinline]] void pop_open_range_slow(ThreadContext& c, std::uint32_t id) noexcept;
inline void pop_open_range(std::uint32_t id, std::uint16_t thread) noexcept {
  ThreadContext& c = t_ctx;
  if (c.slot != thread) [[unlikely]]
    return;
  const std::uint32_t depth = c.open_depth;
  if (depth != 0 && (depth > kOpenRangeDepth || c.open[depth - 1].id == id)) [[likely]] {
    std::atomic_ref<std::uint32_t>(c.open_depth).store(depth - 1, std::memory_order_relaxed);
    return;
  }
  pop_open_range_slow(c, id);
}

// Slow paths (src/collect/collector.cpp).
// Makes the calling thread ready to record into `epoch`: registers it once, resets its buffer
// when it still holds an older epoch. Returns false when the thread cannot record (it is
// exiting, or `epoch` is no longer active).
[[gnu::noinline]] bool prepare_thread(std::uint32_t epoch) noexcept;
// Appends when the fast path cannot: another epoch, a full chunk, or the byte limit reached
// (then the record is dropped and counted).
[[gnu::noinline]] void append_slow(const Record& record, std::uint32_t epoch) noexcept;
// Appends `header` (its `end` set to `bytes`) and `bytes` of payload in ceil(bytes / 16)
// slots, all or nothing: when the byte limit refuses, the blob is dropped and counted as one
// event. Returns false when dropped.
bool append_blob(Record header, const void* payload, std::size_t bytes,
                 std::uint32_t epoch) noexcept;
// reserve_blob when the current chunk cannot hold the blob, or the thread is not ready for
// `epoch`: takes a new chunk, or drops and counts.
[[gnu::noinline]] std::byte* reserve_blob_slow(std::size_t bytes, std::uint32_t epoch) noexcept;

// The number of slots `bytes` of a blob's payload take, and the blob with its header.
constexpr std::size_t payload_slots(std::size_t bytes) noexcept {
  return (bytes + sizeof(Slot) - 1) / sizeof(Slot);
}
constexpr std::size_t blob_slots(std::size_t payload_bytes) noexcept {
  return kRecordSlots + payload_slots(payload_bytes);
}

// The payload bytes a blob could have in the calling thread's current chunk without taking
// another; 0 when the thread does not record into `epoch` yet.
inline std::size_t blob_room(std::uint32_t epoch) noexcept {
  const ThreadContext& c = t_ctx;
  if (c.epoch != epoch || c.cur >= c.end) return 0;
  // The chunk ends one slot after `end`; the header takes two.
  return static_cast<std::size_t>(c.end - c.cur - 1) * sizeof(Slot);
}

// append_blob in steps, for a blob written in place (no copy through a scratch buffer):
// reserve_blob makes room for a header and `bytes` of payload and returns where the payload
// goes, or nullptr when the blob is dropped (counted as one event); blob_header() and
// publish_blob() below then fill and publish it, with at most the bytes reserved. The calling
// thread must append nothing else in between. Inline while the current chunk has the room.
inline std::byte* reserve_blob(std::size_t bytes, std::uint32_t epoch) noexcept {
  if (blob_room(epoch) >= bytes) [[likely]] {
    return reinterpret_cast<std::byte*>(t_ctx.cur + kRecordSlots);
  }
  return reserve_blob_slow(bytes, epoch);
}

// Writing a blob in place, header included. A Record built on the stack field by field and
// then copied stalls the copy's wide loads on the narrow stores (store forwarding fails);
// written straight into the buffer it costs the stores alone.
//   Record* h = blob_header();  // after blob_room() or reserve_blob() made room
//   ... fill *h and the payload after it ...
//   publish_blob(payload_bytes);
inline Record* blob_header() noexcept { return reinterpret_cast<Record*>(t_ctx.cur); }
inline void publish_blob(std::size_t payload_bytes) noexcept {
  ThreadContext& c = t_ctx;
  c.cur += blob_slots(payload_bytes);
  c.chunk->published.store(c.cur, std::memory_order_release);
}

// Appends one record to the calling thread's buffer for `epoch`. No lock, no allocation
// unless a new chunk is needed; publishing is one release store.
inline void append(const Record& record, std::uint32_t epoch) noexcept {
  ThreadContext& c = t_ctx;
  if (c.epoch == epoch && c.cur < c.end) [[likely]] {
    *reinterpret_cast<Record*>(c.cur) = record;
    c.cur += kRecordSlots;
    c.chunk->published.store(c.cur, std::memory_order_release);
    return;
  }
  append_slow(record, epoch);
}

// Appends a range that began on the calling thread (slot `thread`) at `start` and ended at
// `end`: as a compact range when it qualifies (see kCompactNameBits), else as `full()`, a
// Record. `tag` is compact_tag() of its name, or 0 when the name has no compact index.
template <typename Full>
inline void append_range(std::uint64_t start, std::uint64_t end, std::uint32_t id,
                         std::uint16_t thread, std::uint32_t tag, std::uint32_t epoch,
                         Full full) noexcept {
  ThreadContext& c = t_ctx;
  if (c.epoch == epoch && c.cur < c.end && c.slot == thread && tag != 0) [[likely]] {
    // The chunk's header is the line `published` is stored to below: reading it costs no miss.
    const std::uint64_t from_base = start - c.chunk->base_ticks;  // wraps: began before it
    const std::uint64_t duration = end - start;
    if (((from_base | duration) >> 32) == 0) [[likely]] {
      c.cur->word[0] = from_base | (duration << 32);
      c.cur->word[1] = id | (static_cast<std::uint64_t>(tag) << 32);
      ++c.cur;
      c.chunk->published.store(c.cur, std::memory_order_release);
      return;
    }
  }
  append(full(), epoch);
}

}  // namespace opscope::internal
