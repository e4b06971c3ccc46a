// The Kineto / Chrome JSON importer (importer.h): a trace file (.json or .json.gz) into a builder.
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
#include "import/kineto_importer.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "import/importer.h"
#include "import/json_check.h"
#include "import/kineto_join.h"
#include "import/piece_queue.h"
#include "import/stream_splitter.h"
#include "import/trace_text.h"
#include "json/json_reader.h"
#include "opscope/error.h"

namespace opscope::import {
namespace {

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

// Drops what a failed read built, leaving `builder` as new. The failed builder is swapped out and
// destroyed whole, by its destructor: a move assignment onto `builder` would free its result
// before its other members, among them the thread that a builder given reserve() maps the
// result's fresh pages on.
void start_over(ProfilerResult::Builder& builder) {
  ProfilerResult::Builder failed;
  std::swap(failed, builder);
}

}  // namespace

void Reader::read_streaming(std::size_t batch_bytes, std::size_t chunk_bytes, bool inflate_ahead,
                            bool parse_helper) {
  TextChunks chunks(path_, chunk_bytes, kInflateWholeUpTo, inflate_ahead, options_.limits);
  StreamSplitter splitter(batch_bytes);
  {
    // A text inflated on a thread of its own has its spare core taken.
    PieceQueue pieces(path_, parse_helper && !chunks.inflates_ahead(), options_,
                      [this](Piece& p) { merge(p); });
    const std::int64_t most = options_.limits.max_event_bytes;
    const std::size_t most_piece =
        batch_bytes + static_cast<std::size_t>(std::max<std::int64_t>(most, 0));
    const auto on_events = [&](std::string& text, std::size_t json_size, std::int64_t offset) {
      // A piece is whole events up to batch_bytes, then the one that crosses it: longer, and
      // that one is past the limit (a text inflated at once comes as one chunk, so the check
      // of the piece being gathered below never sees it).
      if (most > 0 && json_size > most_piece) {
        fail_over_limit(splitter, offset + 1, offset + static_cast<std::int64_t>(json_size));
      }
      pieces.add(text, json_size, offset);
    };
    for (std::string_view chunk = chunks.next(); !chunk.empty(); chunk = chunks.next()) {
      splitter.feed(chunk, on_events);
      // One event, or the text around the events, held whole past the limit (checked a chunk
      // at a time: the piece being gathered holds whole events up to kPieceBytes, then the
      // one that crosses it).
      if (most > 0 && (splitter.gathering() > most_piece ||
                       splitter.rest().size() > static_cast<std::size_t>(most))) {
        fail_over_limit(splitter, splitter.gathering_from(), splitter.consumed());
      }
    }
    pieces.finish();
  }
  if (splitter.stray_comma() >= 0) {
    fail_json(path_, splitter.stray_comma(), -1, "expected a value", false);
  }
  if (splitter.opened() && !splitter.complete()) {
    // The text ended inside the events: what rest() holds stops at their '[', so it would be
    // named truncated there, not where the text ends. Unless the events left hold an error
    // before their end (a bracket too many keeps the array open to the end of the text).
    std::size_t off = 0;
    std::string what;
    if (internal::json_error_at(splitter.pending(), off, what) &&
        off < splitter.pending().size()) {
      fail_json(path_, splitter.pending_offset() + static_cast<std::int64_t>(off), -1, what,
                false);
    }
    fail_json(path_, splitter.consumed(), -1, "the text ends inside the \"traceEvents\" array",
              true);
  }
  if (!splitter.complete()) {
    // No events array closed at the top level: the text (kept whole in rest()) read as one
    // document, which names what is wrong with it.
    json_ = simdjson::padded_string(splitter.rest());
    place_ = Place{};
    read_top(/*events_read=*/false);
    build();
    return;
  }
  json_ = simdjson::padded_string(splitter.rest());
  place_ = Place{};
  place_.split_at = splitter.split_at();
  place_.split_shift = splitter.split_shift();
  place_.streamed = true;
  read_top(/*events_read=*/true);
  build();
}

void Reader::fail_over_limit(const StreamSplitter& splitter, std::int64_t from,
                             std::int64_t to) const {
  const std::string most = std::to_string(options_.limits.max_event_bytes);
  const std::string raise =
      "; to read it anyway, raise the limit: --max-event-size BYTES (opscope analyze, analyze "
      "diff) or max_event_size=BYTES (Python), 0 for none";
  if (splitter.rest().size() > static_cast<std::size_t>(options_.limits.max_event_bytes)) {
    const std::string where = splitter.opened() ? "after the events" : "before any events";
    throw LimitError("cannot read trace " + path_ + ": the text around the events array (the " +
                     "top-level keys, " + where + ") holds more than " + most + " bytes, by byte " +
                     std::to_string(splitter.consumed()) + raise);
  }
  const std::string range = "byte " + std::to_string(from) + " to byte " + std::to_string(to);
  throw LimitError("cannot read trace " + path_ + ": an event holds more than " + most +
                   " bytes (or the whitespace between two events does): one of the events from " +
                   range + raise);
}

bool sniff_kineto(std::string_view) {
  // Any text: a Chrome trace's keys may come in any order, its events far into the text, and
  // whatever is not one is best told what a Chrome trace must hold.
  return true;
}

void read_kineto(const TraceText& text, ProfilerResult::Builder& builder,
                 const TraceReadOptions& options) {
  const std::string& path = text.path;
  const bool spare_core = text.spare_core;
  try {
    // The spare core inflates a gzip text, or parses half the pieces of a plain one that is
    // long enough to repay starting a thread.
    const std::int64_t text_size = trace_text_size(path, options.limits);
    Reader reader(path, simdjson::padded_string(), text_size, options, builder);
    reader.read_streaming(kPieceBytes, kChunkBytes, spare_core,
                          spare_core && text_size >= kHelperFrom);
    return;
  } catch (const LimitError&) {
    throw;  // a second read would meet the same limit
  } catch (const Error&) {
    // A piece of the text names a malformed event by the byte it starts at; the strict parser
    // over the whole text names the very byte. Worth a second read while the text is small
    // enough to hold whole.
    if (trace_text_size(path, options.limits) > kInflateWholeUpTo) throw;
  }
  start_over(builder);
  simdjson::padded_string whole = load_trace_text(path, options.limits);
  const auto size = static_cast<std::int64_t>(whole.size());
  Reader reader(path, std::move(whole), size, options, builder);
  reader.read();
}

std::shared_ptr<const ProfilerResult> read_trace_streaming(const std::string& path,
                                                           std::size_t batch_bytes,
                                                           std::size_t chunk_bytes,
                                                           bool inflate_ahead, bool parse_helper,
                                                           const TraceReadOptions& options) {
  ProfilerResult::Builder builder;
  Reader reader(path, simdjson::padded_string(), trace_text_size(path, options.limits), options,
                builder);
  reader.read_streaming(std::max<std::size_t>(batch_bytes, 1),
                        std::max<std::size_t>(chunk_bytes, 1), inflate_ahead, parse_helper);
  return builder.finish();
}

std::shared_ptr<const ProfilerResult> read_trace_whole(const std::string& path,
                                                       const TraceReadOptions& options) {
  ProfilerResult::Builder builder;
  simdjson::padded_string text = load_trace_text(path, options.limits);
  const auto size = static_cast<std::int64_t>(text.size());
  Reader reader(path, std::move(text), size, options, builder);
  reader.read();
  return builder.finish();
}

}  // namespace opscope::import
