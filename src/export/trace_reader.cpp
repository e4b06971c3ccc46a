// read_trace(): a Chrome / Kineto trace file (.json or .json.gz) into a ProfilerResult.
//
// The text comes in chunks (TextChunks: read 64 KiB at a time, or a gzip text inflated at once
// by libdeflate), StreamSplitter cuts its events array into pieces of about 64 KiB between
// events, and each piece is walked with simdjson's On-Demand API, which parses only what is
// asked for: each event's fields are visited in document order and values the model does not
// hold are kept as their raw JSON text (ProfilerResult::other_args). The top-level keys around
// the events are read last. The buffers are kept from piece to piece, so neither the text nor
// simdjson's index of it is ever held whole: the memory a read writes fresh is the model it
// builds (on this project's VM, fresh memory is most of what reading costs). Numbers that are
// times are taken from their text, not through a double: Kineto writes microseconds with a
// nanosecond fraction (1682725898236567.123), more digits than a double holds.
//
// A piece's events are read into a Piece of their own (EventReader), which shares nothing, and
// joined to the model in the order of the text (Reader::merge); with a core to spare, a second
// thread parses pieces while this one cuts and joins them (PieceQueue).
//
// A malformed text is read again whole (read_trace_whole), so that the strict parser names the
// very byte; a piece can only name the event.
#include <fcntl.h>
#include <libdeflate.h>
#include <pthread.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "export/event_blocks.h"
#include "export/trace_text.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/result.h"
#include "opscope/trace_analysis.h"
#include "util/thread_start.h"

namespace opscope {
namespace {

namespace od = simdjson::ondemand;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("cannot read trace " + path + ": " + what);
}

// Microseconds written as a JSON number (or a string holding one; the text without the
// whitespace around it) to integer nanoseconds,
// exactly: digits before the point are microseconds, up to three after it nanoseconds.
// The decimal digits from p on (p left at the first other character) into v, which starts at
// 0; false when they do not fit 64 bits. By hand: every event has several numbers, and
// from_chars was a tenth of the reader's instructions. Nineteen digits always fit, so only the
// digits after them are checked.
bool read_digits(const char*& p, const char* end, std::uint64_t& v) {
  const char* const unchecked = p + std::min<std::ptrdiff_t>(end - p, 19);
  for (; p != unchecked; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d >= 10) return true;
    v = v * 10 + d;
  }
  for (; p != end; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d >= 10) return true;
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  return true;
}

bool micros_text_to_ns(std::string_view t, std::int64_t& ns) {
  if (!t.empty() && t.front() == '"') t = t.substr(1, t.size() >= 2 ? t.size() - 2 : 0);
  const char* p = t.data();
  const char* const end = p + t.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  // The digits before the point (or exponent) by hand: every event has two such numbers, and
  // from_chars plus a search for ".eE" cost more than the rest of the number's reading.
  std::uint64_t us = 0;
  const char* const digits = p;
  // Past 64 bits, or past what an int64 of nanoseconds holds.
  if (!read_digits(p, end, us) || us > static_cast<std::uint64_t>(INT64_MAX / 1000 - 1)) {
    return false;
  }
  if (p != end && *p != '.') {
    if (*p != 'e' && *p != 'E') return false;
    // An exponent: rare; a double is as good as the text then.
    double v = 0;
    const auto [stop, ec] = std::from_chars(digits, end, v);
    if (ec != std::errc() || stop != end) return false;
    ns = static_cast<std::int64_t>(v * 1000.0 + 0.5) * (negative ? -1 : 1);
    return true;
  }
  std::int64_t frac = 0;
  if (p != end) {  // the point: up to three digits are nanoseconds, the fourth rounds
    ++p;
    if (p == end) return false;
    int n = 0;
    for (; p != end; ++p) {
      const auto d = static_cast<unsigned>(*p - '0');
      if (d >= 10) return false;
      if (n < 3) {
        frac = frac * 10 + d;
      } else if (n == 3 && d >= 5) {
        ++frac;  // rounds to the nearest ns
      }
      ++n;
    }
    for (; n < 3; ++n) frac *= 10;
  } else if (p == digits) {
    return false;  // no digits at all
  }
  ns = (static_cast<std::int64_t>(us) * 1000 + frac) * (negative ? -1 : 1);
  return true;
}

// Whether `text` is the literal `lit`: its length and first byte first, then the rest with a
// comparison of known length that the compiler does in line (string_view's == called memcmp
// for every key of every event's args that had a known key's length: 4 % of a read).
template <std::size_t N>
inline bool is(std::string_view text, const char (&lit)[N]) {
  return text.size() == N - 1 && text[0] == lit[0] && std::memcmp(text.data(), lit, N - 1) == 0;
}

// An id or number that may be written as a string: "tid": "stream 7", "pid": "Spans".
struct Id {
  std::int64_t number = 0;
  std::string text;  // set when the value was not a plain integer
  bool operator<(const Id& o) const {
    return number != o.number ? number < o.number : text < o.text;
  }
  bool operator==(const Id& o) const { return number == o.number && text == o.text; }
};

// The index of `value` in `list`, appended when it is not there: for the few names a trace
// has of a kind (categories, flow categories), where a search beats a hash map.
template <typename T, typename V>
std::size_t index_in(std::vector<T>& list, const V& value) {
  std::size_t i = 0;
  while (i < list.size() && list[i] != value) ++i;
  if (i == list.size()) list.emplace_back(value);
  return i;
}

// How the text is read (read_streaming): in chunks of at most kChunkBytes, its events array
// parsed in pieces of about kPieceBytes, into buffers kept from piece to piece; the memory a
// read writes fresh is then the model it builds, whatever the trace's size. Small pieces cost
// less than large ones (on the 9.8 MB trace of bench/analyze_bench.py, 64 KiB: 2,900 pages of
// fresh memory; 1 MiB: 4,500; the whole text: 6,700). A gzip text is inflated by zlib on a
// thread of its own when a core is spare; else at once by libdeflate up to kInflateWholeUpTo,
// by zlib as it is read beyond (TextChunks). A plain text of at least kHelperFrom bytes, with a
// core to spare, has its pieces parsed on two threads (PieceQueue).
constexpr std::size_t kChunkBytes = std::size_t{64} << 10;
constexpr std::size_t kPieceBytes = std::size_t{64} << 10;
constexpr std::int64_t kInflateWholeUpTo = std::int64_t{256} << 20;
constexpr std::int64_t kHelperFrom = std::int64_t{1} << 20;

// Where the text being walked stands in the trace's text, to name the byte of an error: the
// whole text, a piece of its events (from offset_base on), or its top-level keys with the
// events cut out (those after the cut, from split_at on, stood split_shift bytes further).
struct Place {
  std::string_view doc;
  std::int64_t offset_base = 0;
  std::int64_t split_at = INT64_MAX;
  std::int64_t split_shift = 0;
  bool streamed = false;  // doc is not the whole text: the strict parser cannot name the byte
  const char* last_event_at = nullptr;

  std::int64_t offset_of(const char* p) const {
    const auto at = static_cast<std::int64_t>(p - doc.data());
    return offset_base + at + (at >= split_at ? split_shift : 0);
  }
  std::string at_event() const {
    if (last_event_at == nullptr) return "";
    return " (in the event that starts at byte " + std::to_string(offset_of(last_event_at)) + ")";
  }
};

// What walking a text needs whatever it reads: errors named at their place, and the values
// every part of a trace writes the same way (ids, times, raw JSON).
class TextWalker {
 public:
  explicit TextWalker(std::string path) : path_(std::move(path)) {}
  const Place& place() const { return place_; }
  void set_place(const Place& place) { place_ = place; }

 protected:
  void check(simdjson::error_code code, const char* expected) const {
    if (code != simdjson::SUCCESS) [[unlikely]] {
      malformed(code, expected);
    }
  }
  [[noreturn]] void malformed(simdjson::error_code code, const char* expected) const {
    // The strict parser names the exact byte when the place is the whole text; a piece of a
    // streamed one is named by its event.
    internal::fail_malformed(path_, place_.streamed ? std::string_view() : place_.doc, code,
                             place_.at_event(), expected);
  }
  [[noreturn]] void fail(const std::string& what) const { opscope::fail(path_, what); }
  std::string at_event() const { return place_.at_event(); }

  // Parses a value's text that lies inside the document, in place: the document's padding
  // lies beyond any of its parts, so no padded copy is needed.
  simdjson::simdjson_result<od::document> iterate_within(od::parser& p, std::string_view text) {
    const char* end = place_.doc.data() + place_.doc.size();
    if (text.data() < place_.doc.data() || text.data() + text.size() > end) {
      fail("internal error: a value outside the document");
    }
    return p.iterate(text.data(), text.size(),
                     static_cast<std::size_t>(end - text.data()) + simdjson::SIMDJSON_PADDING);
  }

  // The JSON text of a value, whatever its type (internal::raw_json_text).
  std::string_view raw_of(od::value& v, const char* what) {
    std::string_view raw;
    check(internal::raw_json_text(v, raw), what);
    return raw;
  }

  // A scalar's token as written, without the whitespace after it (simdjson's raw token runs
  // to the next one); an object or array gives its first character only.
  static std::string_view token_of(od::value& v) {
    std::string_view raw = v.raw_json_token();
    while (!raw.empty() &&
           (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
      raw.remove_suffix(1);
    }
    return raw;
  }

  // A JSON number or a string of digits as an integer id; anything else keeps its text.
  Id read_id(od::value& v) {
    Id id;
    std::string_view text = token_of(v);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"' &&
        text.find('\\') == std::string_view::npos) {
      text = text.substr(1, text.size() - 2);  // a string without escapes: its text as it is
    } else if (!text.empty() && text.front() == '"') {
      check(v.get_string().get(text), "a string");
    } else if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
      text = raw_of(v, "an id");
    }
    // An integer, or a string of digits; anything else (a fraction, "stream 7") is text.
    if (!int_of(text, id.number)) id.text = std::string(text);
    return id;
  }

  std::int64_t read_micros(od::value& v, const char* what) {
    std::string_view raw = token_of(v);
    if (!raw.empty() && (raw.front() == '{' || raw.front() == '[')) raw = raw_of(v, what);
    std::int64_t ns = 0;
    if (!micros_text_to_ns(raw, ns)) {
      fail(std::string("expected a number of microseconds for \"") + what + "\", found " +
           std::string(raw) + at_event());
    }
    return ns;
  }

  // An integer written as a JSON number or a string of digits ("12"); false for anything
  // else ("0x0", 1.5, null).
  static bool int_of(std::string_view raw, std::int64_t& out) {
    if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"') {
      raw = raw.substr(1, raw.size() - 2);
    }
    const char* p = raw.data();
    const char* const end = p + raw.size();
    const bool negative = p != end && *p == '-';
    if (negative) ++p;
    if (p == end) return false;
    std::uint64_t v = 0;
    if (!read_digits(p, end, v) || p != end) return false;
    if (negative) {
      if (v > std::uint64_t{1} << 63) return false;
      out = static_cast<std::int64_t>(~v + 1);
    } else {
      out = static_cast<std::int64_t>(v);  // above 2^63: the same 64 bits
    }
    return true;
  }

  std::string path_;
  Place place_;
};

// What reading a run of events gives before it joins the model: the events with their names
// and categories as views into the text that was read (or into the parser that read it), and
// threads, categories and flow categories numbered within the run. Reader::merge() joins a
// run to the model; runs are read apart (on two threads, PieceQueue) and joined in the order
// of the text, so that the model is the one a single walk builds.
struct Piece {
  // A (pid, tid) the run's events were on, in the order the run first named it, with what its
  // events said of it.
  struct Thread {
    Id pid;  // a text pid ("Spans") is numbered when it joins the model (Reader::text_pid)
    Id tid;
    bool gpu = false;
    std::int32_t device = -1;  // the last one the run's GPU work named, -1 none
    std::int64_t stream = -1;
    std::int64_t cpu_ranges = 0;
  };
  // One end of a flow ("s", "t" or "f").
  struct FlowEnd {
    std::int64_t id;
    std::int64_t ts;
    std::uint32_t category;  // index into flow_categories
    std::int32_t thread;     // index into threads
    char ph;
  };
  // What a metadata event ("ph": "M") said of a process or thread.
  struct Meta {
    enum class What {
      kProcessName,
      kProcessLabels,
      kProcessSortIndex,
      kThreadName,
      kThreadSortIndex
    };
    What what = What::kProcessName;
    Id pid;                    // for a process
    std::int32_t thread = -1;  // for a thread: index into threads
    std::string text;
    std::int64_t number = 0;
  };

  // Event::thread indexes threads; Event::category is 0 (implied) or 1 + an index into
  // categories; Event::detail indexes details; Event::other_args indexes other_args.
  std::vector<Event> events;
  std::vector<EventDetail> details;
  std::string other_text;  // the other args' texts, one after the other
  std::vector<std::pair<std::size_t, std::size_t>> other_args;  // (start, size) in other_text
  std::vector<Thread> threads;
  std::vector<std::string_view> categories;
  std::vector<std::string> text_pids;  // the text pids named, in the order first named
  std::vector<std::string_view> flow_categories;
  std::vector<FlowEnd> flow_ends;
  std::vector<Meta> metadata;  // in the order of the text
  std::uint64_t skipped = 0;   // events of a phase the model does not hold
  bool memory_events = false;  // some "[memory]" event was read
  std::exception_ptr error;    // what stopped the reading (after the events before it)

  void clear() {
    events.clear();
    details.clear();
    other_text.clear();
    other_args.clear();
    threads.clear();
    categories.clear();
    text_pids.clear();
    flow_categories.clear();
    flow_ends.clear();
    metadata.clear();
    skipped = 0;
    memory_events = false;
    error = nullptr;
  }
};

// Reads events into a Piece: everything a reading thread needs of its own (an args parser,
// scratch space). It touches nothing shared, so two of them read two pieces at once.
class EventReader : public TextWalker {
 public:
  EventReader(const std::string& path, const TraceReadOptions& options)
      : TextWalker(path), options_(options) {}

  // The events of the array `events` (walked in the text of place()), into `piece`; every
  // `flush_every` events (0: never) `flush(piece)` is called, which joins them to the model
  // and clears the piece.
  template <typename Flush>
  void read_events(od::array& events, Piece& piece, std::size_t flush_every, Flush&& flush) {
    piece_ = &piece;
    for (auto item : events) {
      od::value ev;
      check(item.get(ev), "an event");
      const char* at = nullptr;
      if (ev.current_location().get(at) == simdjson::SUCCESS) place_.last_event_at = at;
      od::object e;
      check(ev.get_object().get(e), "an event object");
      read_event(e);
      if (flush_every != 0 && piece.events.size() >= flush_every) flush(piece);
    }
  }

  // A piece of the events array cut out of the text ("[" + events + "]", padded as simdjson
  // needs), parsed by `parser` (whose strings the piece's names then point into, until the
  // parser parses again). What stops it is kept in piece.error, for the merge to throw in
  // the order of the text.
  void read_piece(std::string_view text, std::int64_t offset, od::parser& parser, Piece& piece) {
    piece.clear();
    place_ = Place{text, offset, INT64_MAX, 0, /*streamed=*/true, nullptr};
    try {
      if (parser.capacity() < text.size()) {
        // Room for pieces a little longer than this one too: a piece ends after the event that
        // crosses its nominal size, and each longer one would otherwise have the parser's
        // buffers allocated, and their pages written, anew.
        check(parser.allocate(text.size() + text.size() / 8), "room to parse the events");
      }
      od::document doc;
      check(parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING)
                .get(doc),
            "the events");
      od::array events;
      check(doc.get_array().get(events), "an array of events");
      read_events(events, piece, 0, [](Piece&) {});
    } catch (...) {
      piece.error = std::current_exception();
    }
  }

 private:
  void read_event(od::object& e) {
    std::string_view ph, cat, name;
    std::int64_t ts = 0, dur = 0;
    bool has_ts = false, has_dur = false;
    Id pid;
    Id tid;
    Id id;
    bool has_id = false;
    std::string_view args_raw;
    // A complete event's args are read where they stand (one pass over their text) when its
    // phase and category came first, as Kineto and opscope write them; otherwise their text is
    // kept and read once the event is whole.
    Event pre;
    EventDetail& pre_detail = detail_;  // its GPU part reset below when used (the args set
                                        // nothing else); added to the piece by copy
    bool args_read = false;
    bool args_any = false;
    EventKind kind = EventKind::kOther;
    RecordScope scope = RecordScope::kFunction;
    bool left_out = false;     // a CPU range the options leave out: only its thread is read further
    bool range_asked = false;  // leaves_out() was asked, with the phase, category and name known
    const auto ask_left_out = [&] {
      if (range_asked || ph.empty() || cat.empty() || name.empty()) return;
      range_asked = true;
      left_out = leaves_out(ph, cat, name);
    };

    for (auto field : e) {
      // The key compared as it is written, without unescaping it into a buffer: every field
      // the model reads has a plain name (a name spelled with escapes is not recognized, and
      // goes where unknown fields go).
      // The field used where the iteration built it, not copied out (read_arg says why).
      check(field.error(), "an event field");
      od::field&& f = std::move(field).value_unsafe();
      const simdjson::ondemand::raw_json_string key = f.key();
      od::value& v = f.value();
      const char* k = key.raw();
      const auto key_is = [&](const char* name) { return key.unsafe_is_equal(name); };
      if (left_out) {
        if (k[0] == 'p' && key_is("pid")) {
          pid = read_id(v);
          if (!pid.text.empty()) note_text_pid(pid.text);
        } else if (k[0] == 't' && key_is("tid")) {
          tid = read_id(v);
        }
        continue;  // the value is skipped unread
      }
      if (k[0] == 'p' && key_is("ph")) {
        check(v.get_string().get(ph), "\"ph\" as a string");
        // A flow left out is left as soon as its phase is known (the walk skips the rest).
        if (!options_.flows && is_flow_phase(ph)) return;
        ask_left_out();
      } else if (k[0] == 'c' && key_is("cat")) {
        check(v.get_string().get(cat), "\"cat\" as a string");
        ask_left_out();
      } else if (k[0] == 'n' && key_is("name")) {
        od::json_type type = od::json_type::null;
        check(v.type().get(type), "a name");
        if (type == od::json_type::string) {
          check(v.get_string().get(name), "\"name\" as a string");
        } else {
          name = raw_of(v, "a name");
        }
        ask_left_out();
      } else if (k[0] == 'p' && key_is("pid")) {
        pid = read_id(v);
        if (!pid.text.empty()) note_text_pid(pid.text);
      } else if (k[0] == 't' && key_is("tid")) {
        tid = read_id(v);
      } else if (k[0] == 't' && key_is("ts")) {
        ts = read_micros(v, "ts");
        has_ts = true;
      } else if (k[0] == 'd' && key_is("dur")) {
        dur = read_micros(v, "dur");
        has_dur = true;
      } else if (k[0] == 'i' && key_is("id")) {
        id = read_id(v);
        has_id = true;
      } else if (k[0] == 'a' && key_is("args")) {
        if (ph.size() == 1 && ph[0] == 'X' && !cat.empty()) {
          od::object o;
          if (v.get_object().get(o) != simdjson::SUCCESS) {
            fail("expected \"args\" to be an object" + at_event());
          }
          kind = kind_of(cat, scope);
          args_read = true;
          if (!reads_args_of(kind)) continue;
          reset_gpu(pre_detail);
          args_any = read_args_object(o, pre, pre_detail, kind != EventKind::kRange);
        } else {
          args_raw = raw_of(v, "\"args\"");
        }
      } else {
        // "bp" (flows bind to the enclosing slice, which is how Kineto writes them), "s",
        // "id2", "tts", ...: not kept.
        raw_of(v, "a value");
      }
    }
    if (ph.empty()) {
      ++piece_->skipped;
      return;
    }
    ask_left_out();  // in case the phase, category or name came last
    if (left_out) {
      ++piece_->threads[static_cast<std::size_t>(thread_index(pid, tid))].cpu_ranges;
      return;
    }
    switch (ph[0]) {
      case 'X':
        if (!has_ts) fail("a complete event (\"ph\":\"X\") without \"ts\"" + at_event());
        if (!args_read) {
          kind = kind_of(cat, scope);
          if (reads_args_of(kind)) {
            reset_gpu(pre_detail);
            args_any = read_args(args_raw, pre, pre_detail, kind != EventKind::kRange);
          }
        }
        add_complete(cat, kind, scope, name, pid, tid, ts,
                     has_dur ? std::max<std::int64_t>(dur, 0) : 0, pre, pre_detail, args_any);
        return;
      case 'i':
      case 'I':
        if (!has_ts) fail("an instant event without \"ts\"" + at_event());
        add_instant(cat, name, pid, tid, ts, args_raw);
        return;
      case 'M':
        read_metadata_event(name, pid, tid, args_raw);
        return;
      case 's':
      case 'f':
      case 't':
        if (!has_ts || !has_id || !options_.flows) return;
        add_flow_end(ph[0], cat, id, thread_index(pid, tid), ts);
        return;
      default:
        // Counters ("C"), async pairs ("b"/"e"), objects: not in the model yet; counted and
        // reported.
        ++piece_->skipped;
        return;
    }
  }

  // Whether a complete event is a CPU range other than a profiler step, which the options
  // leave out (TraceReadOptions::cpu_ranges), from its phase, category and name.
  bool leaves_out(std::string_view ph, std::string_view cat, std::string_view name) const {
    if (options_.cpu_ranges || ph.size() != 1 || ph[0] != 'X') return false;
    RecordScope scope = RecordScope::kFunction;
    return kind_of(cat, scope) == EventKind::kRange && !internal::is_profiler_step(name);
  }

  // The detail's GPU part as a default one, copied from one that was not just written: a
  // temporary EventDetail, built by narrow stores and copied at once by wide loads, stalled
  // on store forwarding (perf annotate: a sixth of read_event's samples).
  static void reset_gpu(EventDetail& d) {
    static const GpuInfo kNone{};
    d.gpu = kNone;
  }

  // Kineto names some processes with text ("Spans", "Traces"); they are numbered in the order
  // the trace first names them (Reader::text_pid), which the piece keeps.
  void note_text_pid(const std::string& text) {
    std::vector<std::string>& seen = piece_->text_pids;
    if (std::find(seen.begin(), seen.end(), text) == seen.end()) seen.push_back(text);
  }

  // The piece's index of the thread (pid, tid), added the first time it is named.
  std::int32_t thread_index(const Id& pid, const Id& tid) {
    std::vector<Piece::Thread>& threads = piece_->threads;
    const auto same = [&](const Piece::Thread& t) { return t.tid == tid && t.pid == pid; };
    if (last_thread_ < threads.size() && same(threads[last_thread_])) {
      return static_cast<std::int32_t>(last_thread_);
    }
    for (last_thread_ = 0; last_thread_ < threads.size(); ++last_thread_) {
      if (same(threads[last_thread_])) return static_cast<std::int32_t>(last_thread_);
    }
    threads.push_back({pid, tid});
    return static_cast<std::int32_t>(last_thread_);
  }

  static EventKind kind_of(std::string_view cat, RecordScope& scope) {
    scope = RecordScope::kFunction;
    if (is(cat, "cpu_op") || is(cat, "Operator") || is(cat, "operator")) return EventKind::kRange;
    if (is(cat, "user_annotation")) {
      scope = RecordScope::kUserScope;
      return EventKind::kRange;
    }
    if (is(cat, "kernel") || is(cat, "Kernel")) return EventKind::kKernel;
    if (is(cat, "gpu_memcpy") || is(cat, "Memcpy")) return EventKind::kMemcpy;
    if (is(cat, "gpu_memset") || is(cat, "Memset")) return EventKind::kMemset;
    if (is(cat, "cuda_runtime") || is(cat, "Runtime") || is(cat, "hip_runtime") ||
        is(cat, "privateuse1_runtime")) {
      return EventKind::kRuntime;
    }
    if (is(cat, "cuda_driver") || is(cat, "Driver") || is(cat, "hip_driver"))
      return EventKind::kDriver;
    if (is(cat, "gpu_user_annotation")) return EventKind::kGpuAnnotation;
    return EventKind::kOther;
  }

  // A category for Event::category as the piece holds it: 1 + its index in the piece's.
  std::uint16_t category(std::string_view cat) {
    const std::size_t i = index_in(piece_->categories, cat);
    return static_cast<std::uint16_t>(std::min<std::size_t>(i + 1, UINT16_MAX));
  }
  // 0 when the kind and scope imply the category.
  std::uint16_t category_index(std::string_view cat, EventKind kind, RecordScope scope) {
    return cat == implied_category(kind, scope) ? 0 : category(cat);
  }

  // "[1, 2, 3]" into `out`; false for anything else.
  static bool triple_of(std::string_view raw, std::int32_t (&out)[3]) {
    if (raw.size() < 2 || raw.front() != '[' || raw.back() != ']') return false;
    raw = raw.substr(1, raw.size() - 2);
    for (int i = 0; i < 3; ++i) {
      const std::size_t comma = raw.find(',');
      if ((i < 2) != (comma != std::string_view::npos)) return false;
      std::string_view item = raw.substr(0, comma);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      std::int64_t n = 0;
      if (!int_of(item, n)) return false;
      out[i] = static_cast<std::int32_t>(n);
      if (comma != std::string_view::npos) raw.remove_prefix(comma + 1);
    }
    return true;
  }

  // Reads the args object: the fields the model holds go to `e` and `d`; every other arg, and
  // a known one whose value is not what the field holds (AMD's "stream": "0x0"), is kept as
  // JSON text for e.other_args. Returns whether `d` holds anything.
  bool read_args(std::string_view raw, Event& e, EventDetail& d, bool gpu_side) {
    if (raw.empty() || raw == "{}") return false;
    od::document doc;
    check(iterate_within(args_parser_, raw).get(doc), "\"args\"");
    od::object o;
    if (doc.get_object().get(o) != simdjson::SUCCESS) {
      fail("expected \"args\" to be an object" + at_event());
    }
    return read_args_object(o, e, d, gpu_side);
  }

  // The args object's fields, walked in the document (the main one, or a value's text parsed
  // in place: either way its text lies in place().doc).
  bool read_args_object(od::object& o, Event& e, EventDetail& d, bool gpu_side) {
    bool any = false;
    std::string& other = other_args_;  // one buffer for every event: its text is kept (copied)
    other.clear();
    for (auto f : o) {
      std::string_view key, value_raw;
      read_arg(f, key, value_raw);
      std::int64_t n = 0;
      const bool is_int = int_of(value_raw, n);
      bool kept = true;
      if (is(key, "External id") && is_int) {
        if (gpu_side) {
          d.gpu.external_id = n;
          any = true;
        } else {
          e.handle = static_cast<std::uint64_t>(n);
        }
      } else if (is(key, "Sequence number") && !gpu_side && is_int) {
        e.sequence_nr = n;
      } else if (is(key, "Fwd thread id") && !gpu_side && is_int) {
        e.forward_thread_id = static_cast<std::uint64_t>(n);
      } else if (is(key, "Record function id") && !gpu_side && is_int) {
        // The same as "External id" when opscope wrote the trace; written again from it.
      } else if (is(key, "correlation") && is_int) {
        d.gpu.correlation = n;
        any = true;
      } else if (is(key, "device") && gpu_side && is_int) {
        d.gpu.device = static_cast<std::int32_t>(n);
        any = true;
      } else if (is(key, "stream") && gpu_side && is_int) {
        d.gpu.stream = n;
        any = true;
      } else if (is(key, "grid") && gpu_side && triple_of(value_raw, d.gpu.grid)) {
        any = true;
      } else if (is(key, "block") && gpu_side && triple_of(value_raw, d.gpu.block)) {
        any = true;
      } else if (is(key, "registers per thread") && gpu_side && is_int) {
        d.gpu.registers_per_thread = static_cast<std::int32_t>(n);
        any = true;
      } else if (is(key, "shared memory") && gpu_side && is_int) {
        d.gpu.shared_memory = n;
        any = true;
      } else if (is(key, "bytes") && gpu_side && is_int) {
        d.gpu.bytes = n;
        any = true;
      } else {
        kept = false;
      }
      if (kept || !options_.other_args) continue;
      add_other_arg(other, key, value_raw);
    }
    if (!other.empty()) e.other_args = keep_other_args(other);
    return any;
  }

  // An arg no field holds, appended to the object text `other` is building (key already
  // escaped as JSON, as it was written); keep_other_args closes the object and keeps it.
  static void add_other_arg(std::string& other, std::string_view key, std::string_view value) {
    other += other.empty() ? "{" : ",";
    other += '"';
    other += key;
    other += "\":";
    other += value;
  }
  std::int32_t keep_other_args(std::string& other) {
    other += "}";
    piece_->other_args.emplace_back(piece_->other_text.size(), other.size());
    piece_->other_text += other;
    return static_cast<std::int32_t>(piece_->other_args.size() - 1);
  }

  // One field of an args object: its key as it is written (escapes and all: the args are
  // parsed in place, so the key's text runs from just after its opening quote to the last
  // quote before the value) and its value's JSON text.
  // The field is taken out of the iteration's result once and its key and value used in place:
  // taking key() and value() from the result copies each through the stack, and the copy's
  // wide load stalls on the narrow stores that built it (perf annotate; 2-4 % of a whole read
  // of the 9.8 MB trace in runs alternated with the code before).
  void read_arg(simdjson::simdjson_result<od::field>& field, std::string_view& key,
                std::string_view& value_raw) {
    check(field.error(), "an args field");
    od::field&& f = std::move(field).value_unsafe();
    const simdjson::ondemand::raw_json_string raw_key = f.key();
    value_raw = raw_of(f.value(), "an args value");
    const char* key_end = value_raw.data();
    while (key_end > raw_key.raw() && *--key_end != '"') {
    }
    key = std::string_view(raw_key.raw(), static_cast<std::size_t>(key_end - raw_key.raw()));
  }

  std::int32_t add_detail(const EventDetail& d) {
    piece_->details.push_back(d);
    return static_cast<std::int32_t>(piece_->details.size() - 1);
  }

  // A complete event; `e` holds what its args set (read_args), `d` the rest of them when
  // `has_detail`.
  void add_complete(std::string_view cat, EventKind kind, RecordScope scope, std::string_view name,
                    const Id& pid, const Id& tid, std::int64_t ts, std::int64_t dur, Event& e,
                    const EventDetail& d, bool has_detail) {
    e.name = name;  // kept in the model's names when the piece joins it
    e.kind = kind;
    e.scope = scope;
    e.category = category_index(cat, kind, scope);
    e.start_ns = ts;
    e.end_ns = ts + dur;
    e.thread = thread_index(pid, tid);
    Piece::Thread& t = piece_->threads[static_cast<std::size_t>(e.thread)];
    if (has_detail) {
      if (is_gpu_kind(kind)) {
        t.gpu = true;
        if (d.gpu.device >= 0) t.device = d.gpu.device;
        if (d.gpu.stream >= 0) t.stream = d.gpu.stream;
      }
      e.detail = add_detail(d);
    } else if (is_gpu_kind(kind)) {
      t.gpu = true;
    }
    if (kind == EventKind::kRange) ++t.cpu_ranges;
    piece_->events.push_back(e);
  }

  void add_instant(std::string_view cat, std::string_view name, const Id& pid, const Id& tid,
                   std::int64_t ts, std::string_view args) {
    Event e;
    e.name = name;
    e.kind = EventKind::kInstant;
    e.start_ns = e.end_ns = ts;
    e.thread = thread_index(pid, tid);
    if (cat != "cpu_instant_event") e.category = category(cat);
    EventDetail d;
    if (name == "[memory]" && is(cat, "cpu_instant_event") && read_memory_args(args, e, d)) {
      e.kind = EventKind::kMemory;
      e.category = 0;
      piece_->memory_events = true;
      e.detail = add_detail(d);
    } else if (read_args(args, e, d, true)) {
      e.detail = add_detail(d);
    }
    piece_->events.push_back(e);
  }

  // An allocation report as Kineto writes it (and opscope: chrome_trace.cpp): "Device Type"
  // (c10's: CPU 0, CUDA 1, MKLDNN 2, IDEEP 5, HIP 6), "Device Id", "Addr", "Bytes" (negative
  // on free), "Total Allocated", "Total Reserved"; opscope's "opscope action": "version" marks
  // an in-place write. Other args are kept. False (and `e`, `d` untouched) when "Bytes" is
  // missing or the device is none of those: the event stays an instant with all its args.
  bool read_memory_args(std::string_view raw, Event& e, EventDetail& d) {
    if (raw.empty()) return false;
    od::document doc;
    check(iterate_within(args_parser_, raw).get(doc), "\"args\" of a [memory] event");
    od::object o;
    if (doc.get_object().get(o) != simdjson::SUCCESS) return false;
    MemoryUse m;
    bool has_bytes = false, device_known = true, version = false;
    std::string& other = other_args_;
    other.clear();
    for (auto f : o) {
      std::string_view key, value_raw;
      read_arg(f, key, value_raw);
      std::int64_t n = 0;
      const bool is_int = int_of(value_raw, n);
      if (is(key, "Device Type") && is_int) {
        if (n == 0 || n == 2 || n == 5) {
          m.device.type = DeviceType::kCPU;
        } else if (n == 1 || n == 6) {
          m.device.type = DeviceType::kCUDA;
        } else {
          device_known = false;
        }
      } else if (is(key, "Device Id") && is_int && n >= -1 && n <= 127) {
        m.device.index = static_cast<std::int8_t>(n);
      } else if (is(key, "Addr") && is_int) {
        m.address = static_cast<std::uint64_t>(n);
      } else if (is(key, "Bytes") && is_int) {
        m.bytes = n;
        has_bytes = true;
      } else if (is(key, "Total Allocated") && is_int) {
        m.total_allocated = n;
      } else if (is(key, "Total Reserved") && is_int) {
        m.total_reserved = n;
      } else if (is(key, "opscope action") && value_raw == "\"version\"") {
        version = true;
      } else if (options_.other_args) {
        add_other_arg(other, key, value_raw);
      }
    }
    if (!has_bytes || !device_known) return false;
    m.action = version ? MemoryAction::kVersion
                       : (m.bytes < 0 ? MemoryAction::kFree : MemoryAction::kAllocate);
    d.memory = m;
    if (!other.empty()) e.other_args = keep_other_args(other);
    return true;
  }

  void read_metadata_event(std::string_view what, const Id& pid, const Id& tid,
                           std::string_view args) {
    if (args.empty()) return;
    od::document doc;
    check(iterate_within(args_parser_, args).get(doc), "\"args\" of a metadata event");
    od::object o;
    if (doc.get_object().get(o) != simdjson::SUCCESS) return;
    using What = Piece::Meta::What;
    for (auto f : o) {
      std::string_view k;
      check(f.unescaped_key().get(k), "an args key");
      od::value v;
      check(f.value().get(v), "an args value");
      std::string_view s;
      if (what == "process_name" && k == "name") {
        if (v.get_string().get(s) == simdjson::SUCCESS) {
          add_meta(What::kProcessName, pid, -1, s, 0);
        }
      } else if (what == "process_labels" && k == "labels") {
        if (v.get_string().get(s) == simdjson::SUCCESS) {
          add_meta(What::kProcessLabels, pid, -1, s, 0);
        }
      } else if (what == "process_sort_index" && k == "sort_index") {
        add_meta(What::kProcessSortIndex, pid, -1, {}, read_id(v).number);
      } else if (what == "thread_name" && k == "name") {
        if (v.get_string().get(s) == simdjson::SUCCESS) {
          add_meta(What::kThreadName, {}, thread_index(pid, tid), s, 0);
        }
      } else if (what == "thread_sort_index" && k == "sort_index") {
        const std::int64_t n = read_id(v).number;
        add_meta(What::kThreadSortIndex, {}, thread_index(pid, tid), {}, n);
      }
    }
  }

  void add_meta(Piece::Meta::What what, const Id& pid, std::int32_t thread, std::string_view text,
                std::int64_t number) {
    Piece::Meta& m = piece_->metadata.emplace_back();
    m.what = what;
    m.pid = pid;
    m.thread = thread;
    m.text = std::string(text);
    m.number = number;
  }

  void add_flow_end(char ph, std::string_view cat, const Id& id, std::int32_t thread,
                    std::int64_t ts) {
    const std::int64_t key =
        id.text.empty() ? id.number : static_cast<std::int64_t>(std::hash<std::string>{}(id.text));
    // The category as an index into the piece's (a trace has a handful: "ac2g", "fwdbwd").
    const auto category = static_cast<std::uint32_t>(index_in(piece_->flow_categories, cat));
    piece_->flow_ends.push_back({key, ts, category, thread, ph});
  }

  // Whether the args of an event of `kind` are read (TraceReadOptions::cpu_range_args).
  bool reads_args_of(EventKind kind) const {
    return kind != EventKind::kRange || options_.cpu_range_args;
  }
  static bool is_flow_phase(std::string_view ph) {
    return ph.size() == 1 && (ph[0] == 's' || ph[0] == 'f' || ph[0] == 't');
  }

  TraceReadOptions options_;
  Piece* piece_ = nullptr;
  std::size_t last_thread_ = 0;  // thread_index()'s last answer, tried first
  od::parser args_parser_;
  std::string other_args_;  // the other args being gathered (read_args_object() and
                            // read_memory_args()), kept by keep_other_args()
  EventDetail detail_;      // read_event()'s, for a complete event's args
};

class Reader : public TextWalker {
 public:
  // `text_size`: the size of the trace's text, to make room for its events up front.
  Reader(std::string path, simdjson::padded_string json, std::int64_t text_size,
         const TraceReadOptions& options)
      : TextWalker(std::move(path)),
        json_(std::move(json)),
        options_(options),
        events_(path_, options) {
    // Room for the events up front, so that the growing vectors are not copied as they grow (a
    // copy of the details is briefly twice their memory). Kineto writes 250 to 500 bytes an
    // event; room that is never written takes address space, not memory.
    builder_.reserve_for_import(static_cast<std::size_t>(std::max<std::int64_t>(text_size, 0)) /
                                250);
  }

  // The whole document in memory: one walk.
  std::shared_ptr<const ProfilerResult> read() {
    read_top(/*events_read=*/false);
    return build();
  }

  // The document in pieces of about `batch_bytes` (StreamSplitter): each piece of the events
  // array parsed and joined to the model as it comes (on two threads with `parse_helper`),
  // then the rest of the document (its top-level keys around an emptied traceEvents).
  std::shared_ptr<const ProfilerResult> read_streaming(std::size_t batch_bytes,
                                                       std::size_t chunk_bytes, bool inflate_ahead,
                                                       bool parse_helper);

  // Joins what a piece read to the model, in the order of the text: its threads, categories
  // and names become the model's, its details and other args are added, then its events, flow
  // ends and metadata. Throws what stopped the piece's reading, after its events before it.
  void merge(Piece& p) {
    for (const std::string& text : p.text_pids) text_pid(text);
    thread_map_.clear();
    for (const Piece::Thread& t : p.threads) {
      const std::int64_t pid = pid_of(t.pid);
      const std::int32_t index = thread_index(pid, t.tid);
      thread_map_.push_back(index);
      Thread& g = threads_[static_cast<std::size_t>(index)];
      g.gpu = g.gpu || t.gpu;
      if (t.device >= 0) g.device = t.device;
      if (t.stream >= 0) g.stream = t.stream;
      if (t.cpu_ranges > 0) cpu_events_by_pid_[pid] += t.cpu_ranges;
    }
    category_map_.clear();
    for (std::string_view c : p.categories) category_map_.push_back(builder_.category(c));
    for (Event& e : p.events) {
      e.name = keep_name(e.name);
      e.thread = thread_map_[static_cast<std::size_t>(e.thread)];
      if (e.category != 0) e.category = category_map_[e.category - 1u];
      if (e.detail >= 0) e.detail = builder_.add_detail(std::move(p.details[e.detail]));
      if (e.other_args >= 0) {
        const auto [start, size] = p.other_args[static_cast<std::size_t>(e.other_args)];
        e.other_args = builder_.add_other_args(std::string_view(p.other_text).substr(start, size));
      }
      builder_.add_event(e);
    }
    flow_category_map_.clear();
    for (std::string_view c : p.flow_categories) {
      flow_category_map_.push_back(static_cast<std::uint32_t>(index_in(flow_categories_, c)));
    }
    for (const Piece::FlowEnd& f : p.flow_ends) {
      flow_ends_.push_back({f.id, f.ts, flow_category_map_[f.category],
                            thread_map_[static_cast<std::size_t>(f.thread)],
                            static_cast<std::uint32_t>(flow_ends_.size()), f.ph});
    }
    using What = Piece::Meta::What;
    for (Piece::Meta& m : p.metadata) {
      switch (m.what) {
        case What::kProcessName:
          processes_[pid_of(m.pid)].name = std::move(m.text);
          break;
        case What::kProcessLabels:
          processes_[pid_of(m.pid)].labels = std::move(m.text);
          break;
        case What::kProcessSortIndex:
          processes_[pid_of(m.pid)].sort_index = m.number;
          break;
        case What::kThreadName:
          threads_[static_cast<std::size_t>(thread_map_[static_cast<std::size_t>(m.thread)])].name =
              std::move(m.text);
          break;
        case What::kThreadSortIndex:
          threads_[static_cast<std::size_t>(thread_map_[static_cast<std::size_t>(m.thread)])]
              .sort_index = m.number;
          break;
      }
    }
    skipped_ += p.skipped;
    memory_events_ = memory_events_ || p.memory_events;
    if (p.error) std::rethrow_exception(p.error);
  }

 private:
  // Walks the top-level object of json_. With `events_read`, its traceEvents is the emptied
  // array of a streamed document, whose events were read already.
  void read_top(bool events_read) {
    place_.doc = std::string_view(json_.data(), json_.size());
    od::parser parser;
    od::document doc;
    check(parser.iterate(json_).get(doc), "the start of the document");
    od::object top;
    if (doc.get_object().get(top) != simdjson::SUCCESS) {
      fail("expected a JSON object at byte 0 (a Chrome trace: {\"traceEvents\": [...]})");
    }
    bool saw_events = false;
    bool saw_nodes = false;
    for (auto field : top) {
      std::string_view key;
      check(field.unescaped_key().get(key), "an object key");
      od::value v;
      check(field.value().get(v), "a value");
      if (key == "traceEvents") {
        saw_events = true;
        od::array events;
        check(v.get_array().get(events), "an array of events");
        // The events where they stand, joined to the model every kFlushEvery (the names
        // point into this walk's parser, which lives until the walk ends).
        constexpr std::size_t kFlushEvery = 4096;
        Piece piece;
        events_.set_place(place_);
        events_.read_events(events, piece, kFlushEvery, [&](Piece& p) {
          merge(p);
          p.clear();
        });
        merge(piece);
        place_.last_event_at = events_read ? nullptr : events_.place().last_event_at;
      } else if (key == "deviceProperties") {
        device_properties_ = std::string(raw_of(v, "deviceProperties"));
        if (device_properties_ == "[]") device_properties_.clear();
      } else if (key == "schemaVersion" || key == "traceName" || key == "displayTimeUnit" ||
                 key == "baseTimeNanoseconds" || key == "opscope" ||
                 key == "opscope_not_recorded") {
        raw_of(v, "a value");  // the exporter writes these itself
      } else if (key == "nodes") {
        saw_nodes = true;
        raw_of(v, "a value");
      } else if (key == "distributedInfo") {
        const std::string_view raw = raw_of(v, "distributedInfo");
        read_distributed_info(raw);
        metadata_.emplace_back(std::string(key), std::string(raw));
      } else {
        metadata_.emplace_back(std::string(key), std::string(raw_of(v, "a value")));
      }
    }
    // Anything after the top-level object is an error (the document is one value).
    const char* after = nullptr;
    if (doc.current_location().get(after) == simdjson::SUCCESS && after != nullptr) {
      fail("unexpected text after the trace object at byte " +
           std::to_string(place_.offset_of(after)));
    }
    if (!saw_events && saw_nodes) {
      fail(
          "this is an execution trace (Chakra: \"nodes\"), not a Chrome trace with "
          "\"traceEvents\"");
    }
    if (!saw_events) fail("no \"traceEvents\" array in the top-level object");
  }

  struct Thread {
    std::int64_t pid;
    Id tid;
    std::string name;
    std::int64_t sort_index = -1;
    bool gpu = false;
    std::int32_t device = -1;
    std::int64_t stream = -1;
  };
  struct Process {
    std::string name;
    std::string labels;
    std::int64_t sort_index = -1;
  };
  // One end of a flow ("s", "t" or "f"), in the order the trace gave it.
  struct FlowEnd {
    std::int64_t id;
    std::int64_t ts;
    std::uint32_t category;  // index into flow_categories_
    std::int32_t thread;
    std::uint32_t order;  // its place among the trace's flow ends (wraps; see hand_over_flows)
    char ph;
  };

  std::int32_t thread_index(std::int64_t pid, const Id& tid) {
    auto [it, added] = thread_of_.try_emplace({pid, tid}, 0);
    if (added) {
      it->second = static_cast<std::int32_t>(threads_.size());
      threads_.push_back({pid, tid, {}, -1, false, -1, -1});
    }
    return it->second;
  }

  std::string_view keep_name(std::string_view name) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    const std::string_view kept = builder_.keep(name);
    names_.emplace(kept, kept);
    return kept;
  }

  void read_distributed_info(std::string_view raw) {
    // A small object: parse it on its own.
    od::parser p;
    od::document d;
    if (iterate_within(p, raw).get(d) != simdjson::SUCCESS) return;
    od::object o;
    if (d.get_object().get(o) != simdjson::SUCCESS) return;
    for (auto f : o) {
      std::string_view k;
      if (f.unescaped_key().get(k) != simdjson::SUCCESS) return;
      od::value v;
      if (f.value().get(v) != simdjson::SUCCESS) return;
      if (k == "rank") {
        const Id id = read_id(v);
        if (id.text.empty()) rank_ = id.number;
      }
    }
  }

  // Kineto names some processes with text ("Spans", "Traces"): each gets a pid of its own
  // above any real one (2^40 + n, n in the order the trace first names them), named with the
  // text, so that it stays apart.
  std::int64_t text_pid(const std::string& text) {
    auto [it, added] = text_pids_.try_emplace(
        text, (std::int64_t{1} << 40) + static_cast<std::int64_t>(text_pids_.size()));
    if (added) processes_[it->second].name = text;
    return it->second;
  }
  std::int64_t pid_of(const Id& pid) { return pid.text.empty() ? pid.number : text_pid(pid.text); }

  // The flows whose two ends were read, to the builder in the order of their category's name
  // and id. The ends are sorted by (category, id, order read) and each id's ends taken in the
  // order the trace gave them: its last "s" starts the flow, its last "f" (else its first
  // other end) ends it. A sorted array, not a hash map of flows: a map node per flow cost a
  // tenth of a read of a trace full of launch arrows, and more memory.
  void hand_over_flows() {
    std::vector<std::uint32_t> rank(flow_categories_.size());  // of each category's name
    for (std::uint32_t c = 0; c < rank.size(); ++c) {
      for (const std::string& other : flow_categories_) rank[c] += other < flow_categories_[c];
    }
    // `order` is the index in flow_ends_ (below 2^32 ends: 64 GiB of them), so the sort is
    // stable where it matters without std::stable_sort's buffer.
    std::sort(flow_ends_.begin(), flow_ends_.end(), [&](const FlowEnd& a, const FlowEnd& b) {
      if (a.category != b.category) return rank[a.category] < rank[b.category];
      if (a.id != b.id) return a.id < b.id;
      return a.order < b.order;
    });
    builder_.reserve_flows(flow_ends_.size() / 2);  // a flow has two ends at least
    for (std::size_t i = 0; i < flow_ends_.size();) {
      std::size_t j = i;
      const FlowEnd* start = nullptr;
      const FlowEnd* end = nullptr;
      for (; j < flow_ends_.size() && flow_ends_[j].id == flow_ends_[i].id &&
             flow_ends_[j].category == flow_ends_[i].category;
           ++j) {
        const FlowEnd& f = flow_ends_[j];
        if (f.ph == 's') {
          start = &f;
        } else if (f.ph == 'f' || end == nullptr) {
          end = &f;
        }
      }
      if (start != nullptr && end != nullptr) {
        builder_.add_flow(flow_categories_[start->category], start->id, {start->thread, start->ts},
                          {end->thread, end->ts});
      }
      i = j;
    }
    flow_ends_ = {};
  }

  std::shared_ptr<const ProfilerResult> build() {
    // The recording process: the one with the most CPU ops (its threads get pid -1).
    std::int64_t own_pid = 0;
    std::int64_t most = -1;
    for (const auto& [pid, n] : cpu_events_by_pid_) {
      if (n > most) {
        most = n;
        own_pid = pid;
      }
    }
    builder_.set_pid(own_pid);
    builder_.set_rank(rank_);
    if (!device_properties_.empty()) builder_.set_device_properties(device_properties_);
    for (auto& [pid, p] : processes_) {
      if (pid == own_pid) continue;
      builder_.add_process({pid, p.name, p.labels, p.sort_index});
    }
    // Threads in the order they were first seen: Event::thread holds those indices.
    for (const Thread& t : threads_) {
      ThreadInfo info;
      info.tid = t.tid.text.empty() ? static_cast<std::uint64_t>(t.tid.number)
                                    : std::hash<std::string>{}(t.tid.text);
      info.name = !t.name.empty() ? t.name : t.tid.text;
      info.pid = t.pid == own_pid ? -1 : t.pid;
      if (t.gpu) {
        info.device = t.device >= 0 ? t.device : static_cast<std::int32_t>(t.pid);
        info.stream = t.stream >= 0 ? t.stream : t.tid.number;
      }
      builder_.add_thread(std::move(info));
    }
    hand_over_flows();
    std::int64_t first = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    builder_.apply_links([&](Event& e) {
      first = std::min(first, e.start_ns);
      last = std::max(last, e.end_ns);
    });
    if (first > last) first = last = 0;
    builder_.set_window(first, last);
    if (memory_events_) builder_.set_lenses({.profile_memory = true});
    for (auto& [k, v] : metadata_) builder_.add_metadata(std::move(k), std::move(v));
    if (skipped_ > 0) {
      warn("read_trace " + path_ + ": left out " + std::to_string(skipped_) +
           " events of a phase opscope does not hold yet (counters \"C\", async \"b\"/\"e\", "
           "or no \"ph\")");
    }
    return builder_.finish();
  }

  simdjson::padded_string json_;  // the whole text, or its top-level keys when streamed
  TraceReadOptions options_;      // what the read keeps (the piece readers' too)
  EventReader events_;            // the events read on this thread
  ProfilerResult::Builder builder_;
  std::map<std::pair<std::int64_t, Id>, std::int32_t> thread_of_;
  std::vector<Thread> threads_;
  std::map<std::int64_t, Process> processes_;
  std::map<std::string, std::int64_t> text_pids_;
  std::map<std::int64_t, std::int64_t> cpu_events_by_pid_;
  std::unordered_map<std::string_view, std::string_view> names_;
  std::vector<std::string> flow_categories_;
  std::vector<FlowEnd> flow_ends_;
  std::vector<std::int32_t> thread_map_;          // merge(): a piece's threads, the model's
  std::vector<std::uint16_t> category_map_;       // its categories
  std::vector<std::uint32_t> flow_category_map_;  // its flow categories
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::int64_t rank_ = -1;
  std::string device_properties_;
  std::uint64_t skipped_ = 0;   // events of a phase the model does not hold
  bool memory_events_ = false;  // some "[memory]" event was read: the memory lens is on
};

// The events array of a Chrome trace cut out of its text as the text comes, in pieces that end
// between two events: a byte-level walk that knows strings, escapes and nesting, nothing more
// (simdjson checks each piece). What is not the events (the top-level keys around them) is kept
// apart, the array emptied, to be read when the events are.
class StreamSplitter {
 public:
  explicit StreamSplitter(std::size_t batch_bytes) : batch_bytes_(batch_bytes) {}

  // Takes the next bytes of the text; calls on_events(text, json_size, offset) for each piece
  // of the events ready: "[" + whole events separated by commas + "]" (json_size bytes),
  // followed by simdjson's padding, and the offset in the whole text that text[0] stands for.
  // on_events may swap the string for another buffer (the next piece is gathered in that).
  template <typename OnEvents>
  void feed(std::string_view chunk, OnEvents&& on_events) {
    const char* const data = chunk.data();
    const std::size_t n = chunk.size();
    std::size_t seg = 0;  // where the events text not yet copied starts in this chunk
    std::size_t i = 0;
    while (i < n) {
      if (where_ != Where::kEvents) {
        const char c = data[i];
        rest_.push_back(c);
        if (walk_outside(c)) {  // the events array opens after this '['
          where_ = Where::kEvents;
          depth_ = 2;
          events_offset_ = consumed_ + static_cast<std::int64_t>(i) + 1;
          seg = i + 1;
        }
        ++i;
        continue;
      }
      i = walk_events(data, n, i, seg, on_events);
    }
    if (where_ == Where::kEvents) events_.append(data + seg, n - seg);
    consumed_ += static_cast<std::int64_t>(n);
  }

  // True when the events array opened and closed.
  bool complete() const { return where_ == Where::kAfter; }
  // The text without the events ("traceEvents": []): what came before them, up to and with
  // the '[', and what came after, from the ']'.
  const std::string& rest() const { return rest_; }
  // Where the part after the events starts in rest(), and how much further on it stood in the
  // text.
  std::int64_t split_at() const { return split_at_; }
  std::int64_t split_shift() const { return suffix_offset_ - split_at_; }

 private:
  enum class Where { kBefore, kEvents, kAfter };

  // The events array from data[i] on: cuts between events, hands full pieces to on_events,
  // and returns where the walk stopped (n, or just past the ']' that closes the array). The
  // text goes 64 bytes at a time. Until a cut is due, skip_event_blocks() walks the blocks
  // with no backslash and no ']' that could close the array (nearly all), counting their
  // brackets. Another block has which bytes lie in strings computed for the whole block at
  // once, and only its brackets (and its commas, once a cut is due) visited one by one; one
  // with a backslash, and the tail of the chunk, go byte by byte (walk_bytes). The state lives
  // in locals, so that the loop keeps it in registers.
  template <typename OnEvents>
  std::size_t walk_events(const char* data, std::size_t n, std::size_t i, std::size_t& seg,
                          OnEvents& on_events) {
    Walk w{in_string_, escaped_, depth_};
    std::size_t closed_at = n;  // where the ']' closing the array stands, when it came
    std::size_t cut = n;        // where the comma of a cut stands
    while (i < n && closed_at == n) {
      const std::size_t filled = events_.size() + (i - seg);
      if (filled < batch_bytes_ && !w.escaped) {
        // Up to where a cut falls due, the blocks with nothing in them to stop for are
        // walked whole (skip_event_blocks); this loop goes on from the first that has.
        internal::BlockWalk quick{w.in_string, w.depth};
        i = internal::skip_event_blocks(data, i, std::min(n, i + (batch_bytes_ - filled)), quick);
        w.in_string = quick.in_string;
        w.depth = quick.depth;
      }
      const bool cut_due = events_.size() + (i - seg) >= batch_bytes_;
      if (n - i >= 64 && !w.escaped) {
        const internal::BlockMasks b = internal::block_masks(data + i, cut_due);
        if (b.backslash == 0) {
          const std::uint64_t in_string = internal::prefix_xor(b.quote) ^ (w.in_string ? ~0ULL : 0);
          w.in_string = (in_string >> 63) != 0;
          // The brackets, and the commas once a cut is due, in order.
          std::uint64_t marks = (b.open | b.close | (cut_due ? b.comma : 0)) & ~in_string;
          for (; marks != 0; marks &= marks - 1) {
            const std::size_t at = i + static_cast<std::size_t>(std::countr_zero(marks));
            if (w.step(data[at]) != Walk::kNothing) {
              (data[at] == ',' ? cut : closed_at) = at;
              break;
            }
          }
          if (cut != n || closed_at != n) {
            w.in_string = false;  // a cut's comma and the closing ']' lie outside strings
            i = (cut != n ? cut : closed_at);
          } else {
            i += 64;
          }
        } else {
          i = walk_bytes(data, i, i + 64, w, cut_due, cut, closed_at);
        }
      } else {
        i = walk_bytes(data, i, std::min(n, i + 64), w, cut_due, cut, closed_at);
      }
      if (cut != n) {
        events_.append(data + seg, cut - seg);
        flush(on_events);
        seg = cut + 1;
        events_offset_ = consumed_ + static_cast<std::int64_t>(seg);
        i = seg;
        cut = n;
      }
    }
    in_string_ = w.in_string;
    escaped_ = w.escaped;
    depth_ = w.depth;
    if (closed_at == n) return n;
    // The events array closes: the last piece, then the text after it.
    events_.append(data + seg, closed_at - seg);
    flush(on_events);
    where_ = Where::kAfter;
    split_at_ = static_cast<std::int64_t>(rest_.size());
    suffix_offset_ = consumed_ + static_cast<std::int64_t>(closed_at);
    rest_.push_back(']');
    return closed_at + 1;
  }

  // The walk's state between bytes.
  struct Walk {
    bool in_string;
    bool escaped;
    int depth;
    enum Step { kNothing, kCut, kClosed };
    // A byte outside strings that is a bracket or a comma: kCut for a comma between two events
    // (depth 2), kClosed for the ']' that closes the events array.
    Step step(char c) {
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}') {
        --depth;
      } else if (c == ']') {
        if (--depth == 1) return kClosed;
      } else if (c == ',' && depth == 2) {
        return kCut;
      }
      return kNothing;
    }
  };

  // Bytes [i, stop) one by one; stops early at a cut (when `cut_due`) or at the array's close,
  // and says where in `cut` or `closed_at`. Returns where it stopped.
  static std::size_t walk_bytes(const char* data, std::size_t i, std::size_t stop, Walk& w,
                                bool cut_due, std::size_t& cut, std::size_t& closed_at) {
    for (; i < stop; ++i) {
      const char c = data[i];
      if (w.in_string) {
        if (w.escaped) {
          w.escaped = false;
        } else if (c == '\\') {
          w.escaped = true;
        } else if (c == '"') {
          w.in_string = false;
        }
        continue;
      }
      if (c == '"') {
        w.in_string = true;
        continue;
      }
      if (c == ',' && !cut_due) continue;
      switch (w.step(c)) {
        case Walk::kCut:
          cut = i;
          return i;
        case Walk::kClosed:
          closed_at = i;
          return i;
        case Walk::kNothing:
          break;
      }
    }
    return i;
  }

  // Not inlined into feed(): the byte walk stays a small loop of its own (with the reading of a
  // piece inlined into it, the walk ran 30 % slower).
  template <typename OnEvents>
  [[gnu::noinline]] void flush(OnEvents&& on_events) {
    if (events_.find_first_not_of(" \t\r\n", 1) != std::string::npos) {
      // The piece as an array of its own, padded as simdjson needs; the buffer is kept for
      // the next piece, so its memory is written fresh once.
      events_.push_back(']');
      const std::size_t size = events_.size();
      events_.append(simdjson::SIMDJSON_PADDING, '\0');
      on_events(events_, size, events_offset_ - 1);  // which may take the buffer, giving another
    }
    events_.assign(1, '[');
    // Room for the whole piece (its last event crosses the nominal size; then the padding),
    // so that the buffer is not moved, and more fresh pages written, as the piece grows.
    events_.reserve(batch_bytes_ + batch_bytes_ / 8 + simdjson::SIMDJSON_PADDING);
  }

  // Outside the events: follows strings and nesting to find the top-level key "traceEvents"
  // whose value is an array; returns true on that array's '['.
  bool walk_outside(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 1 && expect_key_) {
          key_ = rest_.substr(key_start_, rest_.size() - 1 - key_start_);
        }
      }
      return false;
    }
    if (events_next_ && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      events_next_ = false;
      if (c == '[' && where_ == Where::kBefore) return true;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        key_start_ = rest_.size();
        break;
      case '{':
      case '[':
        if (++depth_ == 1) expect_key_ = true;
        break;
      case '}':
      case ']':
        --depth_;
        break;
      case ',':
        if (depth_ == 1) expect_key_ = true;
        break;
      case ':':
        if (depth_ == 1) {
          expect_key_ = false;
          events_next_ = key_ == "traceEvents";
        }
        break;
      default:
        break;
    }
    return false;
  }

  std::size_t batch_bytes_;
  Where where_ = Where::kBefore;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool expect_key_ = false;
  bool events_next_ = false;
  std::size_t key_start_ = 0;
  std::string key_;
  std::string rest_;
  std::string events_ = "[";        // the piece being gathered, after a '[' of its own
  std::int64_t events_offset_ = 0;  // the text offset of events_[1]
  std::int64_t consumed_ = 0;       // bytes of text before the chunk being fed
  std::int64_t suffix_offset_ = 0;
  std::int64_t split_at_ = INT64_MAX;
};

// The pieces of the events array between the cutter and the model. The reading thread cuts
// them; they are parsed in that order by whichever thread is free, and joined to the model
// (`join`) in that order by whichever thread is free when the oldest one is parsed: the
// reading thread and, with `helper`, a second one. Joining is a third of the work of a piece
// (most of it the model's fresh pages) and the reading thread alone cuts, so the helper joins
// too: with the reading thread joining every piece, it was the one the read waited for
// (bench/RESULTS.md, 2026-11-28). Each piece has a slot of its own (its text, the parser whose
// strings its names point into, what it read) until it is joined, so at most kSlots pieces are
// held. One join runs at a time (`joining_`); what a join throws (a piece's error) stops the queue,
// and the reading thread throws it.
class PieceQueue {
 public:
  using Join = std::function<void(Piece&)>;
  PieceQueue(const std::string& path, bool helper, const TraceReadOptions& options, Join join)
      : slots_(helper ? kSlots : 1),
        join_(std::move(join)),
        reader_(path, options),
        helper_reader_(path, options) {
    for (auto& s : slots_) s = std::make_unique<Slot>();
    if (helper) helper_ = util::start_thread_beside([this] { help(); });
  }
  ~PieceQueue() {
    if (!helper_.joinable()) return;
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    helper_.join();
  }
  PieceQueue(const PieceQueue&) = delete;
  PieceQueue& operator=(const PieceQueue&) = delete;

  // Takes a piece the cutter filled ("[" + events + "]" + simdjson's padding; `json_size`
  // bytes of JSON standing at `offset` in the text), swapping buffers with it. With a helper,
  // the reading thread then goes back to cutting, and parses or joins only when every slot is
  // taken (step()); without one, it parses the piece and joins it here.
  void add(std::string& text, std::size_t json_size, std::int64_t offset) {
    std::unique_lock lock(mutex_);
    while (tail_ - head_ == slots_.size()) step(lock);
    throw_failure();
    Slot& s = slot(tail_);
    s.text.swap(text);
    s.json_size = json_size;
    s.offset = offset;
    s.state = State::kCut;
    ++tail_;
    if (helper_.joinable()) {
      work_.notify_one();
    } else {
      parse_next(lock, reader_);
      join_parsed(lock);
      throw_failure();
    }
  }

  // Every piece added parsed and joined.
  void finish() {
    std::unique_lock lock(mutex_);
    while (head_ != tail_) step(lock);
    throw_failure();
  }

 private:
  // Each slot's text, parser and piece are fresh memory once, which this machine pays for
  // more than for the wait a fuller queue would spare: 4 slots read the 9.8 MB trace in
  // 10.1 ms, 6 in 10.5, 8 in 10.6, 12 in 11.1, 2 in 12.5 (2026-11-28, 60 interleaved runs).
  static constexpr std::size_t kSlots = 4;
  enum class State { kFree, kCut, kParsing, kParsed };
  struct Slot {
    std::string text;
    std::size_t json_size = 0;
    std::int64_t offset = 0;
    od::parser parser;
    Piece piece;
    State state = State::kFree;
  };
  Slot& slot(std::uint64_t n) const { return *slots_[n % slots_.size()]; }

  bool head_joinable() const {
    return !joining_ && failure_ == nullptr && head_ != tail_ &&
           slot(head_).state == State::kParsed;
  }

  void throw_failure() const {
    if (failure_ != nullptr) std::rethrow_exception(failure_);
  }

  // The reading thread's progress towards freeing a slot: joins the head when it is parsed
  // and nobody is joining, else parses the next unclaimed piece here, else waits for the
  // helper to parse or join. One piece at a time: the cutting, which only this thread does,
  // goes on as soon as a slot is free, so that the helper always has a piece to take.
  void step(std::unique_lock<std::mutex>& lock) {
    throw_failure();
    if (head_joinable()) {
      join_parsed(lock, 1);
    } else if (claimed_ != tail_) {
      parse_next(lock, reader_);
    } else {
      const std::uint64_t head = head_;
      changed_.wait(lock, [&] { return failure_ != nullptr || head_ != head || head_joinable(); });
    }
  }

  // Joins the parsed pieces at the head, in order (at most `most` of them), and frees their
  // slots; the lock is let go while a piece is joined. What a join throws is kept in failure_.
  void join_parsed(std::unique_lock<std::mutex>& lock,
                   std::size_t most = std::numeric_limits<std::size_t>::max()) {
    if (!head_joinable() || stop_) return;
    joining_ = true;
    for (; most > 0 && head_ != tail_ && slot(head_).state == State::kParsed && !stop_; --most) {
      Slot& s = slot(head_);
      lock.unlock();
      std::exception_ptr failed;
      try {
        join_(s.piece);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed != nullptr) {
        failure_ = failed;
        break;
      }
      s.state = State::kFree;
      ++head_;
      changed_.notify_all();
    }
    joining_ = false;
    changed_.notify_all();
  }

  // The oldest piece not yet claimed, parsed by `reader` without the lock.
  void parse_next(std::unique_lock<std::mutex>& lock, EventReader& reader) {
    Slot& s = slot(claimed_++);
    s.state = State::kParsing;
    lock.unlock();
    reader.read_piece(std::string_view(s.text.data(), s.json_size), s.offset, s.parser, s.piece);
    lock.lock();
    s.state = State::kParsed;
    changed_.notify_all();
  }

  // The helper: parses pieces as they come, and joins what is parsed at the head, until
  // stopped or a join fails.
  void help() {
    pthread_setname_np(pthread_self(), "opscope-parse");
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || failure_ != nullptr || claimed_ != tail_; });
      if (stop_ || failure_ != nullptr) return;
      parse_next(lock, helper_reader_);
      join_parsed(lock);
    }
  }

  std::vector<std::unique_ptr<Slot>> slots_;
  Join join_;
  std::uint64_t head_ = 0;     // the oldest piece not joined
  std::uint64_t claimed_ = 0;  // the oldest piece not claimed for parsing
  std::uint64_t tail_ = 0;     // the next piece to come
  bool joining_ = false;       // a thread is joining pieces at the head
  bool stop_ = false;
  std::exception_ptr failure_;  // what a join threw
  std::mutex mutex_;
  std::condition_variable work_;     // the helper waits for pieces
  std::condition_variable changed_;  // the reading thread waits for a parse or a join
  EventReader reader_;               // the reading thread's
  EventReader helper_reader_;
  std::thread helper_;  // last: started when everything it uses is there
};

std::shared_ptr<const ProfilerResult> Reader::read_streaming(std::size_t batch_bytes,
                                                             std::size_t chunk_bytes,
                                                             bool inflate_ahead,
                                                             bool parse_helper) {
  internal::TextChunks chunks(path_, chunk_bytes, kInflateWholeUpTo, inflate_ahead);
  StreamSplitter splitter(batch_bytes);
  {
    // A text inflated on a thread of its own has its spare core taken.
    PieceQueue pieces(path_, parse_helper && !chunks.inflates_ahead(), options_,
                      [this](Piece& p) { merge(p); });
    const auto on_events = [&](std::string& text, std::size_t json_size, std::int64_t offset) {
      pieces.add(text, json_size, offset);
    };
    for (std::string_view chunk = chunks.next(); !chunk.empty(); chunk = chunks.next()) {
      splitter.feed(chunk, on_events);
    }
    pieces.finish();
  }
  if (!splitter.complete()) {
    // No events array closed at the top level: the text (kept whole in rest()) read as one
    // document, which names what is wrong with it.
    json_ = simdjson::padded_string(splitter.rest());
    place_ = Place{};
    read_top(/*events_read=*/false);
    return build();
  }
  json_ = simdjson::padded_string(splitter.rest());
  place_ = Place{};
  place_.split_at = splitter.split_at();
  place_.split_shift = splitter.split_shift();
  place_.streamed = true;
  read_top(/*events_read=*/true);
  return build();
}

}  // namespace

std::shared_ptr<const ProfilerResult> read_trace(const std::string& path) {
  return internal::read_trace(path, std::thread::hardware_concurrency() > 1);
}

namespace internal {

std::shared_ptr<const ProfilerResult> read_trace(const std::string& path, bool spare_core,
                                                 const TraceReadOptions& options) {
  try {
    // The spare core inflates a gzip text, or parses half the pieces of a plain one that is
    // long enough to repay starting a thread.
    return read_trace_streaming(path, kPieceBytes, kChunkBytes, spare_core,
                                spare_core && trace_text_size(path) >= kHelperFrom, options);
  } catch (const Error&) {
    // A piece of the text names a malformed event by the byte it starts at; the strict parser
    // over the whole text names the very byte. Worth a second read while the text is small
    // enough to hold whole.
    if (trace_text_size(path) > kInflateWholeUpTo) throw;
  }
  return read_trace_whole(path, options);
}

std::shared_ptr<const ProfilerResult> read_trace_streaming(const std::string& path,
                                                           std::size_t batch_bytes,
                                                           std::size_t chunk_bytes,
                                                           bool inflate_ahead, bool parse_helper,
                                                           const TraceReadOptions& options) {
  Reader reader(path, simdjson::padded_string(), trace_text_size(path), options);
  return reader.read_streaming(std::max<std::size_t>(batch_bytes, 1),
                               std::max<std::size_t>(chunk_bytes, 1), inflate_ahead, parse_helper);
}

std::shared_ptr<const ProfilerResult> read_trace_whole(const std::string& path,
                                                       const TraceReadOptions& options) {
  simdjson::padded_string text = load_trace_text(path);
  const auto size = static_cast<std::int64_t>(text.size());
  Reader reader(path, std::move(text), size, options);
  return reader.read();
}

}  // namespace internal

std::vector<std::shared_ptr<const ProfilerResult>> read_traces(std::span<const std::string> paths,
                                                               unsigned threads,
                                                               const TraceReadOptions& options) {
  std::vector<std::shared_ptr<const ProfilerResult>> out(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // With more threads than traces, a gzip trace is inflated beside its reading.
  const bool spare_core = threads > paths.size();
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, paths.size()));
  // Each worker takes the next unread path: ranks differ in size, so a fixed split would
  // leave cores idle behind the largest.
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < paths.size(); i = next++) {
      try {
        out[i] = internal::read_trace(paths[i], spare_core, options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.push_back(util::start_thread_beside(work));
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

TraceReadOptions what_reports_read(std::span<const std::string> reports) {
  TraceReadOptions read;
  read.cpu_range_args = false;
  read.flows = false;
  read.cpu_ranges = false;
  read.other_args = false;
  for (const ReportKind& k : report_kinds()) {
    if (std::find(reports.begin(), reports.end(), k.name) == reports.end()) continue;
    read.cpu_range_args = read.cpu_range_args || k.reads_cpu_range_args;
    read.flows = read.flows || k.reads_flows;
    read.cpu_ranges = read.cpu_ranges || k.reads_cpu_ranges || k.reads_cpu_range_args;
    read.other_args = read.other_args || k.reads_other_args;
  }
  return read;
}

}  // namespace opscope
