// The flight recorder's raw dump: what a crash handler writes with async-signal-safe calls
// only, and `opscope flight decode` reads back into a trace in another process.
//
// A file is a sequence of sections, each a SectionHead and `bytes` of payload, all
// little-endian and in this machine's layout (the decoder checks the magic, the version and
// the sizes of the structs, and refuses another layout):
//   kHeader    RawHeader                      once, first
//   kChunk     RawChunk, then its slots       one per ring chunk with records
//   kOpenRange RawOpenRange                   the ranges open on the crashing thread
//   kCallSite  RawCallSite, then the name     every call site, by compact index and address
//   kInterned  RawInterned, then the text     every interned name
//   kEnd       nothing                        last: without it the file is incomplete
#pragma once

#include <cstddef>
#include <cstdint>

#include "opscope/internal/collector.h"

namespace opscope::collect::raw {

inline constexpr char kMagic[8] = {'O', 'P', 'S', 'F', 'L', 'I', 'G', 'T'};
inline constexpr std::uint32_t kVersion = 1;

enum class Section : std::uint32_t {
  kHeader = 1,
  kChunk = 2,
  kOpenRange = 3,
  kCallSite = 4,
  kInterned = 5,
  kEnd = 6,
};

struct SectionHead {
  std::uint32_t kind;  // Section
  std::uint32_t reserved;
  std::uint64_t bytes;  // of payload after this head
};

struct RawHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;  // sizeof(RawHeader): the layout check
  std::uint32_t chunk_bytes;   // sizeof(RawChunk)
  std::uint32_t slot_bytes;    // sizeof(internal::Slot)
  std::uint64_t pid;
  std::int32_t signal;  // the signal that ended the process; 0 for std::terminate
  std::uint32_t lenses;
  std::uint64_t dump_ticks;  // and dump_wall_ns: one point of the tick → wall-clock line
  std::int64_t dump_wall_ns;
  double ns_per_tick;
  double keep_seconds;
  std::uint64_t capacity_bytes;
  std::uint64_t used_bytes;
  std::uint64_t chunks_overwritten;
  std::uint64_t records_overwritten;
  std::uint64_t dropped;
};

struct RawChunk {
  std::uint64_t tid;
  std::uint64_t use;  // the order chunks were taken in
  std::uint64_t base_ticks;
  std::uint16_t slot;
  std::uint16_t reserved[3];
  char name[48];  // the thread's
};

struct RawOpenRange {
  std::uint64_t tid;
  std::uint16_t slot;
  std::uint16_t reserved[3];
  internal::OpenRange range;
};

struct RawCallSite {
  std::uint64_t address;  // the CallSite's, as 32-byte records name it
  std::uint32_t index;    // its compact index, as compact ranges name it
  std::uint32_t length;   // of the name that follows
};

struct RawInterned {
  std::uint32_t id;
  std::uint32_t length;  // of the text that follows
};

// Writes through a fixed buffer (no allocation) to a file descriptor, with write(2) only.
// Safe in a signal handler; one writer at a time (the crash handler has one, statically).
class RawWriter {
 public:
  explicit RawWriter(int fd) noexcept : fd_(fd) {}
  RawWriter(const RawWriter&) = delete;
  RawWriter& operator=(const RawWriter&) = delete;

  void section(Section kind, std::uint64_t bytes) noexcept;
  void put(const void* data, std::size_t bytes) noexcept;
  // Writes what is buffered; false when some write failed (the rest was skipped).
  bool flush() noexcept;

 private:
  int fd_;
  bool ok_ = true;
  std::size_t used_ = 0;
  alignas(16) unsigned char buffer_[16384];
};

// The ring's figures (capacity, use, what was overwritten and dropped, lenses) into `header`,
// read without locks. Async-signal-safe. False when no ring runs.
bool ring_figures(RawHeader& header) noexcept;
// The ring's chunks with records, one kChunk section each, read without locks (the ring's
// memory stays mapped while it runs; a chunk being written is read up to what it published).
// Async-signal-safe.
void write_ring_chunks(RawWriter& out) noexcept;
// Every interned name, one kInterned section each, when the table's lock can be taken at
// once (it is not when the crash happened while a name was being added). Async-signal-safe in
// that sense: it never waits.
bool write_interned_names(RawWriter& out) noexcept;

}  // namespace opscope::collect::raw
