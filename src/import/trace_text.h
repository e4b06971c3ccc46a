// A trace file's text, read once into the buffer simdjson parses, or in chunks: shared by
// everything that reads traces (the importers, merge_traces, write_traces_with_counters).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "opscope/error.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// Throws Error "cannot read trace PATH: WHAT", the form of every error of reading a trace.
[[noreturn]] void fail(const std::string& path, const std::string& what);

// The Error a limit of TraceLimits raised: reading the text again (whole, to name a byte)
// would only meet the limit again, so the importer lets it through at once.
class LimitError : public Error {
 public:
  using Error::Error;
};

// The most bytes a gzip file of `file_size` bytes may inflate to under `limits`
// (TraceLimits::max_gzip_ratio): the ratio times the file's size, or kMinInflateLimit when
// that is more; UINT64_MAX with no limit.
inline constexpr std::uint64_t kMinInflateLimit = std::uint64_t{64} << 20;
std::uint64_t max_inflated_size(std::int64_t file_size, const TraceLimits& limits);

// The text of a gzip file inflated by zlib a piece at a time, every member in turn, each
// failure named by its byte in the file: corrupt data, a file that ends inside a member (cut
// short), bytes after the last member that are not gzip (trailing garbage), a text that
// inflates past `max_size` (a LimitError saying how to raise it). The one judge of a gzip
// file's bytes: load_trace_text() falls back to it whenever libdeflate's one-shot inflate
// does not take the file as one whole member, so every command gives one verdict.
class GzipText {
 public:
  GzipText(int fd, const std::string& path, std::int64_t file_size, std::uint64_t max_size,
           double max_ratio);
  ~GzipText();
  GzipText(const GzipText&) = delete;
  GzipText& operator=(const GzipText&) = delete;

  // Up to `size` bytes of the text into `out`; 0 at its end.
  std::size_t read(char* out, std::size_t size);

 private:
  [[noreturn]] void fail_at(const std::string& what) const;

  int fd_;
  const std::string& path_;
  std::int64_t file_size_;
  std::uint64_t max_size_;
  double max_ratio_;
  void* zs_;  // z_stream
  std::vector<unsigned char> in_;
  std::int64_t file_at_ = 0;     // the file's bytes read into in_ so far
  std::int64_t member_at_ = -1;  // where the member being inflated starts; -1 between members
  std::uint64_t produced_ = 0;
  bool ended_ = false;
};

// Throws Error "cannot read trace PATH: out of memory ...": what an allocation failure (a
// std::bad_alloc, or a std::length_error from a size the file gave) while reading a trace
// becomes, so that the tool and Python name the file rather than abort or raise MemoryError.
[[noreturn]] void fail_out_of_memory(const std::string& path);

// The file at `path` opened for reading (O_CLOEXEC), or Error "cannot read trace PATH: ..."
// when it cannot be, or is not a regular file: it is opened without waiting (O_NONBLOCK, so
// that a FIFO with no writer does not hang the open) and refused with what it is ("a FIFO
// (named pipe)", "a directory", "a character device", ...).
int open_regular(const std::string& path);

// The bytes of the file at `path`, inflated when they are gzip (by content, not by name; every
// member of a multi-member file), in a buffer padded as simdjson needs. A plain file is read
// straight into that buffer and a gzip file inflated straight into it (libdeflate, sized by
// the gzip trailer), so the text is written once. Throws Error "cannot read trace PATH: ..."
// naming what went wrong (the system's error, or the byte of the bad gzip member).
// The trailer's size is a hint, bounded by `limits` and by deflate's 1032:1, never an allocation.
simdjson::padded_string load_trace_text(const std::string& path, const TraceLimits& limits = {});

// The size of the file's JSON text, or a bound below it: a plain file's size; for gzip, the
// size its trailer states (modulo 4 GiB) or four times its compressed size, whichever is
// larger, but never more than max_inflated_size() nor 1032 times the file (a corrupt or hostile
// trailer). -1 when the file cannot be examined (load_trace_text then says why).
std::int64_t trace_text_size(const std::string& path, const TraceLimits& limits = {});

// The text of a trace file in chunks, in order, for a reader that does not hold it whole: a
// plain file read `chunk_bytes` at a time into one buffer (its memory written fresh once,
// whatever the file's size). A gzip file, with `inflate_ahead`, is inflated by zlib on a thread
// of its own a few chunks ahead of the reader (for a reader with a core to spare: zlib takes
// about half the time the reading does, so the inflating costs no time); without, inflated at
// once by libdeflate (several times faster than zlib, but it only inflates whole buffers) when
// its text is at most `whole_gzip_up_to`, else by zlib a chunk at a time. Throws Error "cannot
// read trace PATH: ..." as load_trace_text() does.
class TextChunks {
 public:
  TextChunks(const std::string& path, std::size_t chunk_bytes, std::int64_t whole_gzip_up_to,
             bool inflate_ahead, const TraceLimits& limits = {});
  ~TextChunks();
  TextChunks(const TextChunks&) = delete;
  TextChunks& operator=(const TextChunks&) = delete;

  // The next chunk, valid until the next call; empty at the end of the text.
  std::string_view next();
  // Whether a thread of its own inflates the text (it then takes a core).
  bool inflates_ahead() const { return mode_ == Mode::kZlibAhead; }

 private:
  struct Ahead;  // the inflating thread and the chunks it filled

  void open_text(std::int64_t whole_gzip_up_to, bool inflate_ahead, const TraceLimits& limits);
  std::size_t inflate(char* out, std::size_t size);

  std::string path_;
  int fd_ = -1;
  enum class Mode { kPlain, kWhole, kZlib, kZlibAhead } mode_ = Mode::kPlain;
  std::unique_ptr<GzipText> gz_;   // for kZlib and kZlibAhead
  simdjson::padded_string whole_;  // the text inflated at once, for kWhole
  bool whole_given_ = false;
  std::vector<char> buffer_;
  std::unique_ptr<Ahead> ahead_;
};

// The first `size` bytes of the file's text (fewer when it is shorter), inflated when it is
// gzip: what the importers are told apart by (importer.h). Empty when the file is not a regular
// file or cannot be read; the importer that reads it then says why, as it would have.
std::string read_text_head(const std::string& path, std::size_t size);

// A value's JSON text as written (an object or array whole), without the whitespace around it
// (simdjson 3.0 has raw_json() for objects and arrays only; a scalar's token text runs to the
// next token, so it is trimmed); simdjson's error when the value is not well formed. By reference:
// a copy of the value, read whole right after the narrower stores that built it, stalls.
simdjson::error_code raw_json_text(simdjson::ondemand::value& v, std::string_view& out);

// What a trace file with no text is told (the importers, merge, --augment).
inline constexpr std::string_view kEmptyText =
    "the file is empty (0 bytes of text; a Chrome trace is a JSON object: {\"traceEvents\": "
    "[...]})";
inline constexpr std::string_view kBlankText =
    "the text is only whitespace (a Chrome trace is a JSON object: {\"traceEvents\": [...]})";

// Throws Error "cannot read trace PATH: malformed JSON...": where the strict parser
// (is_valid_json) finds the first problem in `json` (empty: not asked), when it does (simdjson
// finds some errors, an unclosed string, before it walks, without a position); else `where` (" (in
// the event that starts at byte N)"), what was `expected` there and simdjson's message for `code`.
[[noreturn]] void fail_malformed(const std::string& path, std::string_view json,
                                 simdjson::error_code code, const std::string& where,
                                 const char* expected);

}  // namespace opscope::import
