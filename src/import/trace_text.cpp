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
#include <sstream>
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

// What a limit's refusal says of raising it.
constexpr const char* kRaiseGzipRatio =
    "to read it anyway, raise the limit: --max-gzip-ratio N (opscope analyze, merge, analyze "
    "diff) or max_gzip_ratio=N (Python), 0 for none";

}  // namespace

std::uint64_t max_inflated_size(std::int64_t file_size, const TraceLimits& limits) {
  if (!(limits.max_gzip_ratio > 0)) return UINT64_MAX;
  const double by_ratio =
      limits.max_gzip_ratio * static_cast<double>(std::max<std::int64_t>(file_size, 0));
  if (by_ratio >= 1.8e19) return UINT64_MAX;
  return std::max(kMinInflateLimit, static_cast<std::uint64_t>(by_ratio));
}

GzipText::GzipText(int fd, const std::string& path, std::int64_t file_size, std::uint64_t max_size,
                   double max_ratio)
    : fd_(fd),
      path_(path),
      file_size_(file_size),
      max_size_(max_size),
      max_ratio_(max_ratio),
      zs_(new z_stream{}),
      in_(std::size_t{1} << 16) {
  auto* zs = static_cast<z_stream*>(zs_);
  // 16 + MAX_WBITS: a gzip header and trailer around each member, checked by zlib.
  if (inflateInit2(zs, 16 + MAX_WBITS) != Z_OK) {
    delete zs;
    fail(path, "out of memory (starting zlib)");
  }
}

GzipText::~GzipText() {
  auto* zs = static_cast<z_stream*>(zs_);
  inflateEnd(zs);
  delete zs;
}

void GzipText::fail_at(const std::string& what) const { fail(path_, what); }

std::size_t GzipText::read(char* out, std::size_t size) {
  auto* zs = static_cast<z_stream*>(zs_);
  std::size_t done = 0;
  while (done < size && !ended_) {
    if (zs->avail_in == 0) {
      ssize_t n = 0;
      do {
        n = ::pread(fd_, in_.data(), in_.size(), file_at_);
      } while (n < 0 && errno == EINTR);
      if (n < 0) fail_at(std::strerror(errno));
      if (n == 0) {
        if (member_at_ < 0) {
          ended_ = true;  // the last member ended with the file
          break;
        }
        fail_at("truncated gzip data: the file ends at byte " + std::to_string(file_at_) +
                " inside the gzip member that starts at byte " + std::to_string(member_at_) +
                " (its end and trailer are missing: a copy cut short?)");
      }
      zs->next_in = in_.data();
      zs->avail_in = static_cast<unsigned>(n);
      file_at_ += n;
    }
    const std::int64_t at = file_at_ - zs->avail_in;  // the file's byte zlib reads next
    if (member_at_ < 0) {
      // A member ended: more bytes are another member (concatenated gzip, as `cat a.gz b.gz`
      // makes), whose first two bytes are gzip's magic; anything else is not gzip.
      unsigned char magic[2] = {0, 0};
      if (::pread(fd_, magic, 2, at) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
        fail_at("trailing garbage: the " + std::to_string(file_size_ - at) + " bytes from byte " +
                std::to_string(at) + " on, after the end of the gzip data, are not gzip");
      }
      inflateReset(zs);
      member_at_ = at;
    }
    const std::size_t room = std::min<std::size_t>(size - done, 1U << 30);
    zs->next_out = reinterpret_cast<unsigned char*>(out + done);
    zs->avail_out = static_cast<unsigned>(room);
    const int r = inflate(zs, Z_NO_FLUSH);
    const std::size_t made = room - zs->avail_out;
    done += made;
    produced_ += made;
    if (produced_ > max_size_) {
      std::ostringstream ratio;
      ratio << max_ratio_;
      throw LimitError("cannot read trace " + path_ + ": its gzip text inflates past " +
                       std::to_string(max_size_) + " bytes (by byte " +
                       std::to_string(file_at_ - zs->avail_in) + " of the file's " +
                       std::to_string(file_size_) + "), more than " + ratio.str() +
                       " times the file's size: a gzip bomb? Real traces inflate 5 to 30 times; " +
                       kRaiseGzipRatio);
    }
    if (r == Z_STREAM_END) {
      member_at_ = -1;
    } else if (r == Z_DATA_ERROR || r == Z_NEED_DICT) {
      fail_at("corrupt gzip data at byte " + std::to_string(file_at_ - zs->avail_in) +
              " (in the gzip member that starts at byte " + std::to_string(member_at_) +
              "; zlib: " + (zs->msg != nullptr ? zs->msg : "invalid data") + ")");
    } else if (r == Z_MEM_ERROR) {
      fail_at("out of memory inflating the gzip data at byte " +
              std::to_string(file_at_ - zs->avail_in));
    }
    // Z_OK, Z_BUF_ERROR: more input or more room wanted; the loop gives whichever ran out.
  }
  return done;
}

// A plain file is read straight into that buffer and a gzip file inflated straight into it
// (libdeflate, whose size hint is the gzip trailer), so the text is written once.
simdjson::padded_string load_trace_text(const std::string& path, const TraceLimits& limits) {
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
  const std::uint64_t max_size = max_inflated_size(st.st_size, limits);
  // The common case: one member, whose trailer holds its size modulo 2^32. The trailer is the
  // file's word, not a fact: it sizes the buffer only within the limit and deflate's 1032:1,
  // and the inflate must then fill it exactly and use every byte of the file.
  if (size >= 18) {
    std::string raw(size, '\0');
    std::memcpy(raw.data(), magic, 2);
    read_all(fd, path, raw.data() + 2, size - 2);
    std::uint32_t isize = 0;
    std::memcpy(&isize, raw.data() + raw.size() - 4, 4);
    if (isize <= size * 1032 && isize <= max_size) {
      std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> d(
          libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
      if (!d) fail(path, "out of memory (starting libdeflate)");
      simdjson::padded_string json(isize);
      std::size_t used_in = 0, produced = 0;
      if (libdeflate_gzip_decompress_ex(d.get(), raw.data(), size, json.data(), isize, &used_in,
                                        &produced) == LIBDEFLATE_SUCCESS &&
          used_in == size && produced == isize) {
        return json;
      }
    }
  }
  // Several members, a member of 4 GiB or more, or a file that is not one whole member (cut
  // short, corrupt, trailing bytes): zlib inflates it in pieces and names what is wrong where
  // (GzipText), the verdict every command gives. The buffer grows as the text comes.
  GzipText gz(fd, path, st.st_size, max_size, limits.max_gzip_ratio);
  std::string out;
  std::size_t step = std::max<std::size_t>(size * 4, std::size_t{1} << 16);
  for (;;) {
    const std::size_t base = out.size();
    out.resize(base + step);
    const std::size_t n = gz.read(out.data() + base, step);
    out.resize(base + n);
    if (n == 0) break;
    step = std::min<std::size_t>(std::max(step, out.size()), std::size_t{256} << 20);
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
                       std::int64_t whole_gzip_up_to, bool inflate_ahead, const TraceLimits& limits)
    : path_(path), buffer_(std::max<std::size_t>(chunk_bytes, 1)) {
  fd_ = open_regular(path);
  try {
    open_text(whole_gzip_up_to, inflate_ahead, limits);
  } catch (...) {
    gz_.reset();
    ::close(fd_);
    throw;
  }
}

void TextChunks::open_text(std::int64_t whole_gzip_up_to, bool inflate_ahead,
                           const TraceLimits& limits) {
  const std::string& path = path_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(path, std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  if (st.st_size < 2 || ::pread(fd_, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
    return;  // plain text, read from fd_
  }
  if (!inflate_ahead && trace_text_size(path, limits) <= whole_gzip_up_to) {
    whole_ = load_trace_text(path, limits);
    mode_ = Mode::kWhole;
    return;
  }
  gz_ = std::make_unique<GzipText>(fd_, path_, st.st_size, max_inflated_size(st.st_size, limits),
                                   limits.max_gzip_ratio);
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
  gz_.reset();
  if (fd_ >= 0) ::close(fd_);
}

// Up to `size` bytes of the text inflated by zlib into `out`; 0 at its end.
std::size_t TextChunks::inflate(char* out, std::size_t size) { return gz_->read(out, size); }

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

std::int64_t trace_text_size(const std::string& path, const TraceLimits& limits) {
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
  // The trailer is the file's word: a hint within what deflate and the limit allow.
  const auto most = static_cast<std::int64_t>(std::min<std::uint64_t>(
      max_inflated_size(size, limits), static_cast<std::uint64_t>(size) * 1032));
  return std::min(std::max<std::int64_t>(isize, size * 4), most);
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
