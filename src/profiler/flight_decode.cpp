// `opscope flight decode`: a crash's raw dump (src/collect/raw_dump.h) back into a trace, in
// another process, with the names, threads and lenses the crashed process had.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cpu_backend.h"
#include "clock/clock.h"
#include "collect/raw_dump.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/flight_recorder.h"
#include "profiler/flight_result.h"

namespace opscope {
namespace {

namespace raw = collect::raw;

constexpr std::uint64_t kMaxFlightRawBytes = 16ull
                                             << 30;  // far above any ring (its bound is the user's)

// The crashed process's names, as the raw dump's sections gave them.
class DumpNames final : public backend::RecordNames {
 public:
  std::string_view interned(std::uint32_t id) const override {
    const auto it = interned_.find(id);
    return it != interned_.end() ? std::string_view(it->second) : "<unknown name>";
  }
  std::string_view site(std::uint32_t index) const override {
    const auto it = by_index_.find(index);
    return it != by_index_.end() ? std::string_view(it->second) : "<unknown call site>";
  }
  std::string_view site_at(std::uint64_t address) const override {
    const auto it = by_address_.find(address);
    return it != by_address_.end() ? std::string_view(by_index_.at(it->second))
                                   : "<unknown call site>";
  }
  bool knows_site(std::uint64_t address) const { return by_address_.contains(address); }

  void add_site(std::uint32_t index, std::uint64_t address, std::string name) {
    by_index_[index] = std::move(name);
    by_address_[address] = index;
  }
  void add_interned(std::uint32_t id, std::string text) { interned_[id] = std::move(text); }
  bool has_interned() const { return !interned_.empty(); }
  bool has_sites() const { return !by_index_.empty(); }

 private:
  std::unordered_map<std::uint32_t, std::string> interned_;
  std::unordered_map<std::uint32_t, std::string> by_index_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_address_;
};

struct RawChunkCopy {
  raw::RawChunk head{};
  std::vector<internal::Slot> slots;
};

std::string read_raw_dump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("opscope flight decode", "cannot open '" + path + "': " + std::strerror(errno));
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<std::uint64_t>(size) > kMaxFlightRawBytes) {
    throw Error("opscope flight decode", "'" + path + "' is not a regular file of at most 16 GiB");
  }
  in.seekg(0);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (!in) throw Error("opscope flight decode", "cannot read '" + path + "'");
  return bytes;
}

}  // namespace

FlightDump decode_flight_dump(const std::string& raw_path, const std::string& out_path) {
  const std::string bytes = read_raw_dump(raw_path);
  const auto bad = [&](std::size_t at, const std::string& what) {
    return Error("opscope flight decode", "'" + raw_path + "' is not a whole flight recorder " +
                                              "crash dump: " + what + " at byte " +
                                              std::to_string(at));
  };
  raw::RawHeader header{};
  bool have_header = false;
  bool ended = false;
  DumpNames names;
  std::vector<RawChunkCopy> chunks;
  std::vector<raw::RawOpenRange> open;
  std::size_t at = 0;
  while (at < bytes.size() && !ended) {
    raw::SectionHead head{};
    if (bytes.size() - at < sizeof head) throw bad(at, "a section cut short");
    std::memcpy(&head, bytes.data() + at, sizeof head);
    const std::size_t body = at + sizeof head;
    if (head.bytes > bytes.size() - body) throw bad(at, "a section longer than the file");
    const char* p = bytes.data() + body;
    const auto kind = static_cast<raw::Section>(head.kind);
    if (!have_header && kind != raw::Section::kHeader) throw bad(at, "no header first");
    switch (kind) {
      case raw::Section::kHeader:
        if (head.bytes != sizeof header) throw bad(at, "a header of another size");
        std::memcpy(&header, p, sizeof header);
        if (std::memcmp(header.magic, raw::kMagic, sizeof header.magic) != 0) {
          throw bad(at, "no opscope flight recorder magic");
        }
        if (header.version != raw::kVersion || header.header_bytes != sizeof(raw::RawHeader) ||
            header.chunk_bytes != sizeof(raw::RawChunk) ||
            header.slot_bytes != sizeof(internal::Slot)) {
          throw bad(at, "version " + std::to_string(header.version) +
                            " or a layout this build does not read (it reads version " +
                            std::to_string(raw::kVersion) + ")");
        }
        have_header = true;
        break;
      case raw::Section::kChunk: {
        if (head.bytes < sizeof(raw::RawChunk) ||
            (head.bytes - sizeof(raw::RawChunk)) % sizeof(internal::Slot) != 0) {
          throw bad(at, "a chunk of " + std::to_string(head.bytes) + " bytes");
        }
        RawChunkCopy c;
        std::memcpy(&c.head, p, sizeof c.head);
        c.head.name[sizeof c.head.name - 1] = '\0';
        c.slots.resize((head.bytes - sizeof c.head) / sizeof(internal::Slot));
        std::memcpy(c.slots.data(), p + sizeof c.head, c.slots.size() * sizeof(internal::Slot));
        chunks.push_back(std::move(c));
        break;
      }
      case raw::Section::kOpenRange: {
        if (head.bytes != sizeof(raw::RawOpenRange)) throw bad(at, "an open range of another size");
        raw::RawOpenRange o{};
        std::memcpy(&o, p, sizeof o);
        open.push_back(o);
        break;
      }
      case raw::Section::kCallSite: {
        raw::RawCallSite s{};
        if (head.bytes < sizeof s) throw bad(at, "a call site cut short");
        std::memcpy(&s, p, sizeof s);
        if (s.length != head.bytes - sizeof s)
          throw bad(at, "a call site's name of another length");
        names.add_site(s.index, s.address, std::string(p + sizeof s, s.length));
        break;
      }
      case raw::Section::kInterned: {
        raw::RawInterned s{};
        if (head.bytes < sizeof s) throw bad(at, "an interned name cut short");
        std::memcpy(&s, p, sizeof s);
        if (s.length != head.bytes - sizeof s) throw bad(at, "an interned name of another length");
        names.add_interned(s.id, std::string(p + sizeof s, s.length));
        break;
      }
      case raw::Section::kEnd:
        ended = true;
        break;
      default:
        throw bad(at, "a section of unknown kind " + std::to_string(head.kind));
    }
    at = body + static_cast<std::size_t>(head.bytes);
  }
  if (!have_header) throw bad(0, "no header");
  if (!ended) throw bad(at, "no end section (the handler did not finish)");

  // Per thread, its chunks in the order it took them (as copy_ring() hands them).
  std::sort(chunks.begin(), chunks.end(), [](const RawChunkCopy& a, const RawChunkCopy& b) {
    return std::tie(a.head.tid, a.head.slot, a.head.use) <
           std::tie(b.head.tid, b.head.slot, b.head.use);
  });
  std::vector<collect::ThreadRecords> threads;
  std::unordered_map<std::uint16_t, std::uint64_t> tid_of_slot;
  std::unordered_map<std::uint16_t, std::string> name_of_slot;
  for (const RawChunkCopy& c : chunks) {
    if (threads.empty() || threads.back().tid != c.head.tid || threads.back().slot != c.head.slot) {
      collect::ThreadRecords t;
      t.tid = c.head.tid;
      t.slot = c.head.slot;
      t.name = c.head.name;
      threads.push_back(std::move(t));
    }
    threads.back().chunks.push_back({c.slots, c.head.base_ticks});
    tid_of_slot[c.head.slot] = c.head.tid;
    name_of_slot[c.head.slot] = c.head.name;
  }

  const clock::TickConverter conv =
      clock::TickConverter::through(header.dump_ticks, header.dump_wall_ns, header.ns_per_tick);
  // The crashing thread's open ranges, on the thread whose chunks have its slot.
  std::vector<flight::OpenEntry> entries;
  for (const raw::RawOpenRange& o : open) {
    const bool interned = (o.range.flags & internal::kNameInterned) != 0;
    const auto tid = tid_of_slot.find(o.slot);
    std::string_view name;
    if (interned) {
      name = names.interned(static_cast<std::uint32_t>(o.range.name));
    } else if (names.knows_site(o.range.name)) {
      name = names.site_at(o.range.name);
    }
    entries.push_back({tid != tid_of_slot.end() ? tid->second : 0,
                       tid != tid_of_slot.end() ? name_of_slot[o.slot] : "crashed thread", o.slot,
                       o.range, name, nullptr});
  }
  flight::DumpFigures figures;
  figures.trigger = "crash";
  figures.keep_seconds = header.keep_seconds;
  figures.signal = header.signal;
  figures.names_written = names.has_sites() || names.has_interned();
  figures.ring.capacity_bytes = header.capacity_bytes;
  figures.ring.used_bytes = header.used_bytes;
  figures.ring.chunks_overwritten = header.chunks_overwritten;
  figures.ring.records_overwritten = header.records_overwritten;
  figures.ring.dropped = header.dropped;
  figures.ring.lenses = header.lenses;
  const flight::DumpResult dumped =
      flight::build_dump_result(threads, entries, conv, header.dump_ticks,
                                static_cast<std::int64_t>(header.pid), figures, &names);
  export_trace(*dumped.result, out_path);
  return {out_path, dumped.result->events().size(), dumped.open_ranges};
}

}  // namespace opscope
