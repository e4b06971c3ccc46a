#include "export/sink.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "opscope/error.h"
#include "util/fresh_memory.h"
#include "util/mix.h"
#include "util/thread_start.h"

namespace opscope::internal {
namespace {

// GzipFileSink's output buffer: a syscall per 256 KiB of compressed output.
constexpr std::size_t kGzipOutBytes = 256 << 10;

// What GzipFileSink's deflate_all() returns when zlib itself fails (never an errno).
constexpr int kZlibFailed = -1;

std::string gzip_reason(int err) {
  return err == kZlibFailed ? "zlib failed to compress" : std::strerror(err);
}

// Unique enough for a temporary name: O_EXCL catches the rare collision and we retry.
std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t x =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      (counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull);
  x = util::mix64(x);
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

// The temporaries not yet committed or removed, for the signal handler: fixed slots, since a
// handler may neither allocate nor lock. A slot is claimed (kFilling), written, then published
// (kListed); the handler reads only listed slots. A process with more temporaries at once than
// slots (none that opscope writes has more than a few) leaves the others to their destructors.
constexpr int kSignalSlots = 64;
enum SlotState : int { kFree, kFilling, kListed };
struct SignalSlot {
  std::atomic<int> state{kFree};
  int dir_fd = AT_FDCWD;
  char path[4096] = {};
};
SignalSlot g_signal_slots[kSignalSlots];

int list_temporary(int dir_fd, const std::string& path) noexcept {
  if (path.size() >= sizeof(SignalSlot::path)) return -1;
  for (int i = 0; i < kSignalSlots; ++i) {
    int expected = kFree;
    if (!g_signal_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    SignalSlot& slot = g_signal_slots[i];
    slot.dir_fd = dir_fd;
    std::memcpy(slot.path, path.c_str(), path.size() + 1);
    slot.state.store(kListed, std::memory_order_release);
    return i;
  }
  return -1;
}

void unlist_temporary(int& slot) noexcept {
  if (slot < 0) return;
  g_signal_slots[slot].state.store(kFree, std::memory_order_release);
  slot = -1;
}

// SIGTERM or SIGINT: every listed temporary removed, then the signal's default action (the
// process ends as the signal says, for the shell and the parent), errno left as it was.
extern "C" void remove_temporaries_and_reraise(int sig) {
  const int saved_errno = errno;
  for (SignalSlot& slot : g_signal_slots) {
    if (slot.state.load(std::memory_order_acquire) == kListed) ::unlinkat(slot.dir_fd, slot.path, 0);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  // Blocked while its handler runs: delivered, with the default action, when it returns.
  ::raise(sig);
  errno = saved_errno;
}

}  // namespace

void remove_temporaries_on_signal() {
  for (const int sig : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    const bool handled = (old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL;
    if (handled) continue;  // ignored (nohup, a background job) or the program's own
    struct sigaction act {};
    act.sa_handler = remove_temporaries_and_reraise;
    ::sigemptyset(&act.sa_mask);
    ::sigaddset(&act.sa_mask, SIGTERM);
    ::sigaddset(&act.sa_mask, SIGINT);
    ::sigaction(sig, &act, nullptr);
  }
}

// No MADV_HUGEPAGE: on the project's VM a transparent huge page cost 4-6 times more per byte
// than 4 KiB pages (the kernel compacts memory to find one), and it made the first
// chrome_trace_json() of a process spend most of its time in the kernel zeroing them
// (bench/RESULTS.md, session_bench).
//
// A large reservation (a trace's estimated size) is mapped from its end on a second core while
// the output is written from its start (util::FreshPages); what the output did not fill is
// given back when it is taken.
void MemorySink::reserve(std::size_t n) {
  stop_mapping_back();
  data_.reserve(n);
  back_ = util::FreshPages::start(data_.data() + data_.size(), data_.capacity() - data_.size());
}

void MemorySink::stop_mapping_back() {
  if (back_ == nullptr) return;
  back_->stop_and_release(data_.data() + data_.size() + 1);  // after the terminating NUL
  back_.reset();
  populated_in_ = nullptr;  // what populate_ahead mapped past the output went too
}

std::string MemorySink::take() {
  stop_mapping_back();
  return std::move(data_);
}

// A large trace is written into memory the process never touched: 168 bytes an event, one
// page fault every 24 events. Mapping the pages ahead of the writes, 16 MiB at a time, costs
// less (util/fresh_memory.h) and maps nothing the trace does not fill but the last step.
void MemorySink::populate_ahead(std::size_t next_write) {
  constexpr std::size_t kStep = 16 << 20;
  if (data_.data() != populated_in_) {  // a new buffer: what it holds is mapped already
    populated_in_ = data_.data();
    populated_ = data_.size();
  }
  const std::size_t need = data_.size() + next_write;
  if (need > data_.capacity()) {  // append() will grow the buffer: decide then
    stop_mapping_back();
    return;
  }
  const std::size_t end = std::min(data_.capacity(), std::max(need, populated_) + kStep);
  util::populate_for_writing(data_.data() + populated_, end - populated_);
  populated_ = end;
}

TempFile::TempFile(std::string path, const FileSinkOptions& options)
    : path_(std::move(path)),
      what_(options.what),
      fsync_(options.fsync),
      dir_fd_(options.dir_fd >= 0 ? options.dir_fd : AT_FDCWD) {
  if (path_.empty()) fail("the path is empty");
  if (dir_fd_ != AT_FDCWD && path_.find('/') != std::string::npos) {
    fail("a name inside an open directory may not contain '/'");
  }
  struct stat st;
  // In a given directory nothing is followed; elsewhere a link to a device counts as one.
  const int stat_flags = dir_fd_ != AT_FDCWD ? AT_SYMLINK_NOFOLLOW : 0;
  if (::fstatat(dir_fd_, path_.c_str(), &st, stat_flags) == 0) {
    if (S_ISDIR(st.st_mode)) fail("it is a directory");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      // Written in place. O_NONBLOCK keeps a FIFO nobody reads from hanging the open; it is
      // cleared once open, so that writes wait for the reader as a program expects.
      fd_ = ::openat(dir_fd_, path_.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
      if (fd_ < 0) {
        const int err = errno;
        fail(err == ENXIO ? "it is a FIFO that nobody reads" : std::strerror(err));
      }
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
      in_place_ = true;
      return;
    }
    // A link in an open directory is replaced, never followed, like a regular file.
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      fail(std::string("it is ") +
           (S_ISSOCK(st.st_mode)  ? "a socket"
            : S_ISBLK(st.st_mode) ? "a block device"
                                  : "not a regular file") +
           "; files are written to regular files, character devices and FIFOs");
    }
  }
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + random_suffix();
    // 0666 before the umask by default, like any file the user creates (mkstemp's 0600 would
    // hide a trace from the colleague it was made for); O_NOFOLLOW: a link planted under the
    // temporary name is not followed.
    // Listed before it exists, so that no moment has it on disk and unlisted.
    signal_slot_ = list_temporary(dir_fd_, temp_path_);
    fd_ = ::openat(dir_fd_, temp_path_.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, options.mode);
    if (fd_ < 0) unlist_temporary(signal_slot_);
    if (fd_ < 0 && (errno != EEXIST || attempt == 10)) {
      const int err = errno;
      temp_path_.clear();  // nothing to remove
      fail(dir_fd_ != AT_FDCWD ? std::strerror(err) : open_reason(path_, err));
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
    ::unlinkat(dir_fd_, temp_path_.c_str(), 0);
    temp_path_.clear();
  }
  unlist_temporary(signal_slot_);
}

void TempFile::fail(const std::string& reason) {
  discard();
  throw Error("cannot write " + what_ + " to '" + path_ + "': " + reason);
}

void TempFile::write(const char* data, std::size_t size) {
  if (const int err = write_all(data, size)) fail(std::strerror(err));
}

int TempFile::write_all(const char* data, std::size_t size) noexcept {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

void TempFile::commit() {
  if (committed_) return;
  if (fsync_ && !in_place_ && ::fsync(fd_) != 0) fail(std::strerror(errno));
  // close() can report a deferred write error (NFS, quotas): check it.
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(std::strerror(errno));
  if (in_place_) {
    committed_ = true;
    return;
  }
  if (::renameat(dir_fd_, temp_path_.c_str(), dir_fd_, path_.c_str()) != 0) {
    fail(std::strerror(errno));
  }
  unlist_temporary(signal_slot_);
  committed_ = true;
  if (fsync_ && dir_fd_ != AT_FDCWD) {
    ::fsync(dir_fd_);
  } else if (fsync_) {
    // The rename itself is durable only once the directory is synced.
    const int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
}

int BufferPipeline::write(std::string_view bytes) {
  // One relaxed load: the thread's failure shows at the next write, not a buffer later.
  if (error_.load(std::memory_order_relaxed) != 0) {
    stop();
    return error_;
  }
  // Always a copy, even of large blocks: the caller reuses its block as soon as we return,
  // while the thread may still be writing the bytes before it.
  while (!bytes.empty()) {
    std::unique_ptr<char[]>& buffer = buffers_[head_ % kBuffers];
    // Not zeroed (new char[], not a vector): a small output touches only the pages it fills.
    if (!buffer) buffer.reset(new char[kBufferBytes]);
    const std::size_t n = std::min(bytes.size(), kBufferBytes - used_);
    std::memcpy(buffer.get() + used_, bytes.data(), n);
    used_ += n;
    bytes.remove_prefix(n);
    if (used_ == kBufferBytes) {
      if (const int err = hand_off()) return err;
    }
  }
  return 0;
}

int BufferPipeline::hand_off() {
  if (!thread_.joinable() && !inline_) {
    try {
      thread_ = util::start_thread_beside([this] {
        // Named so that it can be told apart in top, in traces and by the tests.
        pthread_setname_np(pthread_self(), "opscope-writer");
        run();
      });
    } catch (const std::system_error&) {
      inline_ = true;  // out of threads (or not allowed any): consume here instead
    }
  }
  if (inline_) {
    const int err = consume_(buffers_[head_ % kBuffers].get(), used_);
    used_ = 0;
    error_ = err;
    return err;
  }
  submit();
  std::unique_lock lock(mutex_);
  consumed_.wait(lock, [&] { return head_ - tail_ < kBuffers || error_ != 0; });
  lock.unlock();
  if (error_ != 0) {
    stop();
    return error_;
  }
  return 0;
}

void BufferPipeline::submit() {
  {
    std::lock_guard lock(mutex_);
    sizes_[head_ % kBuffers] = used_;
    ++head_;
  }
  used_ = 0;
  filled_.notify_one();
}

int BufferPipeline::finish() {
  if (thread_.joinable()) {
    // No wait for a free buffer: nothing follows. The thread consumes the rest, then ends.
    if (used_ > 0 && error_ == 0) submit();
    stop();
  } else if (used_ > 0 && error_ == 0) {
    // A small output, or no thread to be had: written here.
    error_ = consume_(buffers_[head_ % kBuffers].get(), used_);
    used_ = 0;
  }
  return error_;
}

void BufferPipeline::cancel() noexcept {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    if (error_ == 0) error_ = ECANCELED;  // makes the thread stop after its current block
  }
  stop();
}

void BufferPipeline::stop() noexcept {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  filled_.notify_one();
  thread_.join();
}

void BufferPipeline::run() noexcept {
  std::unique_lock lock(mutex_);
  for (;;) {
    filled_.wait(lock, [&] { return tail_ != head_ || stop_; });
    if (tail_ == head_ || error_ != 0) return;
    const std::size_t i = tail_ % kBuffers;
    const char* data = buffers_[i].get();
    const std::size_t size = sizes_[i];
    lock.unlock();
    const int err = consume_(data, size);
    lock.lock();
    if (err != 0) error_ = err;
    ++tail_;
    consumed_.notify_one();
  }
}

FileSink::FileSink(std::string path, const FileSinkOptions& options)
    : file_(std::move(path), options),
      pipeline_([this](const char* data, std::size_t size) noexcept {
        return file_.write_all(data, size);
      }) {}

void FileSink::write(std::string_view bytes) {
  if (const int err = pipeline_.write(bytes)) file_.fail(std::strerror(err));
}

void FileSink::commit() {
  if (const int err = pipeline_.finish()) file_.fail(std::strerror(err));
  file_.commit();
}

GzipFileSink::GzipFileSink(std::string path, const FileSinkOptions& options)
    : file_(std::move(path), options),
      out_(kGzipOutBytes),
      pipeline_([this](const char* data, std::size_t size) noexcept {
        zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
        zs_.avail_in = static_cast<uInt>(size);  // a buffer is far below 4 GiB
        return deflate_all(Z_NO_FLUSH);
      }) {
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&zs_, options.gzip_level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    file_.fail("zlib could not start (level " + std::to_string(options.gzip_level) + ")");
  }
}

GzipFileSink::~GzipFileSink() {
  pipeline_.cancel();  // its thread may be inside deflate()
  if (!committed_) deflateEnd(&zs_);
}

// Returns 0, an errno, or kZlibFailed.
int GzipFileSink::deflate_all(int flush) noexcept {
  for (;;) {
    zs_.next_out = out_.data();
    zs_.avail_out = static_cast<uInt>(out_.size());
    const int rc = deflate(&zs_, flush);
    if (rc == Z_STREAM_ERROR) return kZlibFailed;
    const std::size_t n = out_.size() - zs_.avail_out;
    if (const int err = file_.write_all(reinterpret_cast<const char*>(out_.data()), n)) {
      return err;
    }
    if (flush == Z_FINISH ? rc == Z_STREAM_END : zs_.avail_in == 0 && zs_.avail_out != 0) {
      return 0;
    }
  }
}

void GzipFileSink::write(std::string_view bytes) {
  if (const int err = pipeline_.write(bytes)) file_.fail(gzip_reason(err));
}

void GzipFileSink::commit() {
  int err = pipeline_.finish();
  if (err == 0) {
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    err = deflate_all(Z_FINISH);
  }
  deflateEnd(&zs_);
  committed_ = true;
  if (err != 0) file_.fail(gzip_reason(err));
  file_.commit();
}

std::unique_ptr<Sink> open_file_sink(const std::string& path, const FileSinkOptions& options) {
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    return std::make_unique<GzipFileSink>(path, options);
  }
  return std::make_unique<FileSink>(path, options);
}

}  // namespace opscope::internal
