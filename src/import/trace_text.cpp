// load_trace_text(): a trace file's text in simdjson's padded buffer (trace_text.h).
#include "import/trace_text.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "import/json_check.h"
#include "json/json_reader.h"
#include "opscope/error.h"
#include "util/thread_start.h"

namespace opscope::import {

void fail(const std::string& path, const std::string& what) {
  throw Error("cannot read trace " + path + ": " + what);
}

void fail_out_of_memory(const std::string& path) {
  fail(path,
       "out of memory while reading it (the trace needs more memory than this process may "
       "take: raise the limit, `ulimit -v`, or read fewer traces at once, `--threads 1`)");
}

namespace {

// What a file that is not a regular file is, for the refusal.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_regular(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, std::string("it is ") + file_kind(st.st_mode) +
                   ", not a regular file: traces are read from regular files");
  }
  // Reads of a regular file never wait; the flag is cleared all the same.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

namespace {

// The whole of an open file, read into `out` (whose size it becomes).
void read_all(int fd, const std::string& path, char* out, std::size_t size) {
  std::size_t at = 0;
  while (at < size) {
    const ssize_t n = ::read(fd, out + at, size - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, std::strerror(errno));
    if (n == 0) fail(path, "the file shrank while it was read");
    at += static_cast<std::size_t>(n);
  }
}

}  // namespace

// A plain file is read straight into that buffer and a gzip file inflated straight into it
// (libdeflate, whose size hint is the gzip trailer), so the text is written once.
simdjson::padded_string load_trace_text(const std::string& path) {
  const int fd = open_regular(path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, std::strerror(errno));
  const auto size = static_cast<std::size_t>(st.st_size);
  unsigned char magic[2] = {0, 0};
  if (size >= 2) read_all(fd, path, reinterpret_cast<char*>(magic), 2);
  const bool gzip = magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gzip) {
    simdjson::padded_string json(size);
    std::memcpy(json.data(), magic, std::min<std::size_t>(size, 2));
    if (size > 2) read_all(fd, path, json.data() + 2, size - 2);
    return json;
  }
  std::string raw(size, '\0');
  std::memcpy(raw.data(), magic, 2);
  read_all(fd, path, raw.data() + 2, size - 2);

  std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> d(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (!d) fail(path, "out of memory");
  // The common case: one member, whose trailer holds its size modulo 2^32.
  if (size >= 18) {
    std::uint32_t isize = 0;
    std::memcpy(&isize, raw.data() + raw.size() - 4, 4);
    // Deflate shrinks data at most 1032:1, so a size beyond that is a corrupt hint.
    if (isize <= size * 1032) {
      simdjson::padded_string json(isize);
      std::size_t used_in = 0, produced = 0;
      if (libdeflate_gzip_decompress_ex(d.get(), raw.data(), size, json.data(), isize, &used_in,
                                        &produced) == LIBDEFLATE_SUCCESS &&
          used_in == size && produced == isize) {
        return json;
      }
    }
  }
  // Several members, or a member of 4 GiB or more: each member inflated in turn, the buffer
  // grown as needed.
  std::string out;
  std::size_t in_at = 0;
  while (in_at < raw.size()) {
    const std::size_t left = raw.size() - in_at;
    if (left < 18) fail(path, "truncated gzip data at byte " + std::to_string(in_at));
    std::size_t room = std::min<std::size_t>(left * 4, left * 1032 + 4096);
    for (;;) {
      const std::size_t base = out.size();
      out.resize(base + room);
      std::size_t used_in = 0, produced = 0;
      const libdeflate_result r = libdeflate_gzip_decompress_ex(
          d.get(), raw.data() + in_at, left, out.data() + base, room, &used_in, &produced);
      if (r == LIBDEFLATE_SUCCESS) {
        out.resize(base + produced);
        in_at += used_in;
        break;
      }
      out.resize(base);
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE && room < left * 1032 + 4096) {
        room *= 2;
        continue;
      }
      fail(path, "not valid gzip data (corrupt or truncated) in the member at byte " +
                     std::to_string(in_at));
    }
  }
  return simdjson::padded_string(out);
}

// The chunks the inflating thread fills: kSlots buffers, taken in turn. `filled` counts the
// chunks it handed over, `taken` those the reader is done with; a slot is free again once
// taken.
struct TextChunks::Ahead {
  static constexpr std::size_t kSlots = 8;
  std::mutex mutex;
  std::condition_variable more;  // a chunk was filled, or the thread ended
  std::condition_variable room;  // a slot was freed, or the reader is leaving
  std::vector<char> slot[kSlots];
  std::size_t size[kSlots] = {};
  std::size_t filled = 0;
  std::size_t taken = 0;
  bool holding = false;  // the reader holds slot taken % kSlots (the last next())
  bool ended = false;    // the text ended, or inflating failed (error)
  bool leaving = false;  // the reader is done
  std::exception_ptr error;
  std::thread thread;
};

TextChunks::TextChunks(const std::string& path, std::size_t chunk_bytes,
                       std::int64_t whole_gzip_up_to, bool inflate_ahead)
    : path_(path), buffer_(std::max<std::size_t>(chunk_bytes, 1)) {
  fd_ = open_regular(path);
  try {
    open_text(whole_gzip_up_to, inflate_ahead);
  } catch (...) {
    if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
    ::close(fd_);
    throw;
  }
}

void TextChunks::open_text(std::int64_t whole_gzip_up_to, bool inflate_ahead) {
  const std::string& path = path_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(path, std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  if (st.st_size < 2 || ::pread(fd_, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
    return;  // plain text, read from fd_
  }
  if (!inflate_ahead && trace_text_size(path) <= whole_gzip_up_to) {
    whole_ = load_trace_text(path);
    mode_ = Mode::kWhole;
    return;
  }
  const int gz_fd = ::dup(fd_);
  if (gz_fd < 0) fail(path, std::strerror(errno));
  gz_ = gzdopen(gz_fd, "rb");
  if (gz_ == nullptr) {
    ::close(gz_fd);
    fail(path, "out of memory");
  }
  gzbuffer(static_cast<gzFile>(gz_), 1 << 15);
  if (!inflate_ahead) {
    mode_ = Mode::kZlib;
    return;
  }
  mode_ = Mode::kZlibAhead;
  ahead_ = std::make_unique<Ahead>();
  for (std::vector<char>& slot : ahead_->slot) slot.resize(buffer_.size());
  ahead_->thread = util::start_thread_beside([this] {
    Ahead& a = *ahead_;
    for (std::size_t at = 0;; ++at) {
      {
        std::unique_lock lock(a.mutex);
        a.room.wait(lock, [&] { return a.leaving || a.filled - a.taken < Ahead::kSlots; });
        if (a.leaving) return;
      }
      std::vector<char>& slot = a.slot[at % Ahead::kSlots];
      std::size_t n = 0;
      std::exception_ptr error;
      try {
        n = inflate(slot.data(), slot.size());
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(a.mutex);
        if (error) {
          a.error = error;
          a.ended = true;
        } else {
          a.size[at % Ahead::kSlots] = n;
          ++a.filled;
          a.ended = n == 0;
        }
      }
      a.more.notify_one();
      if (error || n == 0) return;
    }
  });
}

TextChunks::~TextChunks() {
  if (ahead_) {
    {
      std::lock_guard lock(ahead_->mutex);
      ahead_->leaving = true;
    }
    ahead_->room.notify_one();
    ahead_->thread.join();
  }
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
  if (fd_ >= 0) ::close(fd_);
}

// Up to `size` bytes of the text inflated by zlib into `out`; 0 at its end.
std::size_t TextChunks::inflate(char* out, std::size_t size) {
  const auto f = static_cast<gzFile>(gz_);
  const int n = gzread(f, out, static_cast<unsigned>(std::min<std::size_t>(size, 1U << 30)));
  int code = 0;
  const char* why = gzerror(f, &code);
  if (n < 0) {
    fail(path_,
         code == Z_ERRNO ? std::strerror(errno) : std::string("not valid gzip data (") + why + ")");
  }
  // zlib ends a truncated member as if the text ended, and says so only here.
  if (n == 0 && code != Z_OK) {
    fail(path_, std::string("not valid gzip data (corrupt or truncated: ") + why + ")");
  }
  return static_cast<std::size_t>(n);
}

std::string_view TextChunks::next() {
  switch (mode_) {
    case Mode::kWhole:
      if (whole_given_) return {};
      whole_given_ = true;
      return {whole_.data(), whole_.size()};
    case Mode::kZlib:
      return {buffer_.data(), inflate(buffer_.data(), buffer_.size())};
    case Mode::kZlibAhead: {
      Ahead& a = *ahead_;
      std::unique_lock lock(a.mutex);
      if (a.holding) {
        a.holding = false;
        ++a.taken;
        a.room.notify_one();
      }
      a.more.wait(lock, [&] { return a.filled > a.taken || a.ended; });
      if (a.filled == a.taken) {
        if (a.error) std::rethrow_exception(a.error);
        return {};
      }
      a.holding = true;
      const std::size_t slot = a.taken % Ahead::kSlots;
      return {a.slot[slot].data(), a.size[slot]};
    }
    case Mode::kPlain:
      break;
  }
  for (;;) {
    const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path_, std::strerror(errno));
    return {buffer_.data(), static_cast<std::size_t>(n)};
  }
}

std::int64_t trace_text_size(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  const auto size = static_cast<std::int64_t>(st.st_size);
  unsigned char head[2] = {0, 0};
  if (size < 18 || ::pread(fd, head, 2, 0) != 2 || head[0] != 0x1f || head[1] != 0x8b) return size;
  std::uint32_t isize = 0;
  if (::pread(fd, &isize, 4, size - 4) != 4) return size;
  return std::max<std::int64_t>(isize, size * 4);
}

std::string read_text_head(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return {};
  }
  // zlib reads a plain file as it is and inflates a gzip one, only as far as the head.
  gzFile gz = ::gzdopen(fd, "rb");
  if (gz == nullptr) {
    ::close(fd);
    return {};
  }
  std::string head(size, '\0');
  const int n = ::gzread(gz, head.data(), static_cast<unsigned>(size));
  ::gzclose(gz);
  head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return head;
}

simdjson::error_code raw_json_text(simdjson::ondemand::value& v, std::string_view& out) {
  namespace od = simdjson::ondemand;
  od::json_type type = od::json_type::null;
  if (const auto e = v.type().get(type); e != simdjson::SUCCESS) return e;
  std::string_view raw;
  if (type == od::json_type::object) {
    od::object o;
    if (const auto e = v.get_object().get(o); e != simdjson::SUCCESS) return e;
    if (const auto e = o.raw_json().get(raw); e != simdjson::SUCCESS) return e;
  } else if (type == od::json_type::array) {
    od::array a;
    if (const auto e = v.get_array().get(a); e != simdjson::SUCCESS) return e;
    if (const auto e = a.raw_json().get(raw); e != simdjson::SUCCESS) return e;
  } else {
    raw = v.raw_json_token();
  }
  while (!raw.empty() &&
         (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  out = raw;
  return simdjson::SUCCESS;
}

void fail_malformed(const std::string& path, std::string_view json, simdjson::error_code code,
                    const std::string& where, const char* expected) {
  // simdjson allocates without throwing and says so: the file is not malformed.
  if (code == simdjson::MEMALLOC) fail_out_of_memory(path);
  std::size_t off = 0;
  std::string what;
  if (!json.empty() && internal::json_error_at(json, off, what)) {
    fail_json(path, static_cast<std::int64_t>(off), -1, what, off == json.size());
  }
  fail(path,
       "malformed JSON" + where + ": expected " + expected + "; " + simdjson::error_message(code));
}

}  // namespace opscope::import
