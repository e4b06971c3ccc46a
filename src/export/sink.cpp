#include "export/sink.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "opscope/error.h"

namespace opscope::internal {
namespace {

// Writes this large go straight to the file; smaller ones are gathered into a buffer of
// this size first, so a caller writing small pieces costs few syscalls.
constexpr std::size_t kBlock = 64 << 10;

// Unique enough for a temporary name: O_EXCL catches the rare collision and we retry.
std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t x = static_cast<std::uint64_t>(
                        std::chrono::steady_clock::now().time_since_epoch().count()) ^
                    (counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull);
  // splitmix64 finaliser: spreads the bits so names differ in their first characters.
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  char buf[17];
  for (int i = 15; i >= 0; --i, x >>= 4) buf[i] = "0123456789abcdef"[x & 0xF];
  return std::string(buf, 16);
}

std::string parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Why open() failed, in words a user can act on.
std::string open_reason(const std::string& path, int err) {
  if (err == ENOENT) {
    struct stat st;
    if (::stat(parent_dir(path).c_str(), &st) != 0) return "directory does not exist";
  }
  return std::strerror(err);
}

}  // namespace

void MemorySink::reserve(std::size_t n) {
  data_.reserve(n);
  // A trace of a million events is ~170 MB: faulting it in 4 KiB pages costs more than
  // writing it. Where transparent huge pages are opt-in, ask for them on the whole 2 MiB
  // pages inside the buffer; elsewhere this does nothing.
  constexpr std::uintptr_t kHuge = 2 << 20;
  if (data_.capacity() < 4 * kHuge) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data_.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data_.data()) + data_.capacity()) & ~(kHuge - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

TempFile::TempFile(std::string path, const FileSinkOptions& options)
    : path_(std::move(path)), what_(options.what), fsync_(options.fsync) {
  if (path_.empty()) fail("the path is empty");
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail("it is a directory");
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + random_suffix();
    // 0666 before the umask, like any file the user creates (mkstemp's 0600 would hide a
    // trace from the colleague it was made for).
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 10)) {
      const int err = errno;
      temp_path_.clear();  // nothing to remove
      fail(open_reason(path_, err));
    }
  }
}

TempFile::~TempFile() {
  if (!committed_) discard();
}

void TempFile::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }
}

void TempFile::fail(const std::string& reason) {
  discard();
  throw Error("cannot write " + what_ + " to '" + path_ + "': " + reason);
}

void TempFile::write(const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(std::strerror(errno));
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void TempFile::commit() {
  if (committed_) return;
  if (fsync_ && ::fsync(fd_) != 0) fail(std::strerror(errno));
  // close() can report a deferred write error (NFS, quotas): check it.
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(std::strerror(errno));
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail(std::strerror(errno));
  committed_ = true;
  if (fsync_) {
    // The rename itself is durable only once the directory is synced.
    const int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
}

FileSink::FileSink(std::string path, const FileSinkOptions& options)
    : file_(std::move(path), options) {}

void FileSink::write(std::string_view bytes) {
  if (bytes.size() >= kBlock) {
    // Large blocks (what the exporters write) skip the extra copy.
    flush();
    file_.write(bytes.data(), bytes.size());
    return;
  }
  if (buffer_.empty()) buffer_.resize(kBlock);
  if (buffer_.size() - used_ < bytes.size()) flush();
  std::memcpy(buffer_.data() + used_, bytes.data(), bytes.size());
  used_ += bytes.size();
}

void FileSink::flush() {
  file_.write(buffer_.data(), used_);
  used_ = 0;
}

void FileSink::commit() {
  flush();
  file_.commit();
}

GzipFileSink::GzipFileSink(std::string path, const FileSinkOptions& options)
    : file_(std::move(path), options), out_(4 * kBlock) {
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs_, options.gzip_level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    file_.fail("zlib could not start (level " + std::to_string(options.gzip_level) + ")");
  }
}

GzipFileSink::~GzipFileSink() {
  if (!committed_) deflateEnd(&zs_);
}

void GzipFileSink::deflate_all(int flush) {
  for (;;) {
    zs_.next_out = out_.data();
    zs_.avail_out = static_cast<uInt>(out_.size());
    const int rc = deflate(&zs_, flush);
    if (rc == Z_STREAM_ERROR) file_.fail("zlib failed to compress");
    file_.write(reinterpret_cast<const char*>(out_.data()), out_.size() - zs_.avail_out);
    if (flush == Z_FINISH ? rc == Z_STREAM_END : zs_.avail_in == 0 && zs_.avail_out != 0) {
      return;
    }
  }
}

void GzipFileSink::write(std::string_view bytes) {
  // avail_in is 32 bits: feed very large blocks in pieces.
  while (!bytes.empty()) {
    const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs_.avail_in = static_cast<uInt>(n);
    deflate_all(Z_NO_FLUSH);
    bytes.remove_prefix(n);
  }
}

void GzipFileSink::commit() {
  zs_.next_in = nullptr;
  zs_.avail_in = 0;
  deflate_all(Z_FINISH);
  deflateEnd(&zs_);
  committed_ = true;
  file_.commit();
}

std::unique_ptr<Sink> open_file_sink(const std::string& path, const FileSinkOptions& options) {
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    return std::make_unique<GzipFileSink>(path, options);
  }
  return std::make_unique<FileSink>(path, options);
}

}  // namespace opscope::internal
