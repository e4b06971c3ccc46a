// sink.h: where exporters write bytes (memory, file, gzip file).
//
// An exporter produces a format; a sink owns the destination, as Kineto's ActivityLogger and
// Google Benchmark's reporters separate the two. File sinks never leave a half-written file:
// bytes go to "<path>.tmp.<pid>.<random>" in the same directory and commit() renames it over
// `path`; a sink destroyed before commit() (an exception on the way) removes its temporary.
//
//   std::unique_ptr<Sink> sink = open_file_sink("trace.json.gz", {.what = "Chrome trace"});
//   sink->write(bytes);   // as many times as needed, ideally in large blocks
//   sink->commit();       // the file appears at its path, complete
//
// Failures throw opscope::Error: "cannot write Chrome trace to 'x.json': No space left on
// device". A sink is used by one thread at a time; a large output is written (and
// compressed) by a thread of the sink's own while the caller produces the next bytes, so a
// failure may surface from a later write() than the one that caused it, or from commit().
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/fresh_memory.h"

namespace opscope::internal {

// A program that writes files through sinks (the `opscope` tool) calls this once so that
// SIGTERM and SIGINT remove the temporaries of the sinks not yet committed before the program
// ends by the signal as it would have (an interrupted `opscope merge` left
// "M.json.tmp.<pid>.<hex>" behind). The handler only unlinks and re-raises, which is
// async-signal-safe; a signal the program ignores or handles already is left as it is. Not
// called by the library itself: a traced program's signals are its own.
void remove_temporaries_on_signal();

class Sink {
 public:
  virtual ~Sink() = default;
  // Appends bytes. Not after commit().
  virtual void write(std::string_view bytes) = 0;
  // Completes the output; nothing is visible at the destination before.
  virtual void commit() = 0;
};

class MemorySink final : public Sink {
 public:
  void write(std::string_view bytes) override {
    if (data_.size() + bytes.size() > populated_ || data_.data() != populated_in_) [[unlikely]] {
      populate_ahead(bytes.size());
    }
    data_.append(bytes);
  }
  void commit() override { committed_ = true; }

  bool committed() const { return committed_; }
  const std::string& data() const { return data_; }
  std::string take();
  // Reserves room for `n` bytes; see sink.cpp for the large case.
  void reserve(std::size_t n);
  // Empties the sink but keeps its memory, to reuse it.
  void clear() {
    data_.clear();
    committed_ = false;
  }

 private:
  // Maps the pages the next writes go to, ahead of them, in large steps (see sink.cpp).
  void populate_ahead(std::size_t next_write);

  // Stops mapping from the back (before data_ can move) and unmaps what it mapped that the
  // output did not fill.
  void stop_mapping_back();

  std::string data_;
  bool committed_ = false;
  const char* populated_in_ = nullptr;  // data_'s buffer when populated_ was set
  std::size_t populated_ = 0;           // data_'s bytes up to here are mapped
  // reserve()'s pages, mapped from the back on a second core while the output is written.
  // Declared after data_, so stopped before it is freed.
  std::unique_ptr<util::FreshPages> back_;
};

struct FileSinkOptions {
  // What is written, for error messages: "cannot write <what> to '<path>': <reason>".
  std::string what = "file";
  // fsync the file and its directory at commit: the file survives a crash of the machine,
  // at the price of waiting for the disk.
  bool fsync = false;
  // zlib level for GzipFileSink. 1 (fastest) compresses trace JSON about 10x already;
  // higher levels cost several times the export time for a few percent.
  int gzip_level = 1;
  // The permissions of a new file, before the umask: 0666 like any file a user creates, or
  // 0600 for a file only its owner may read (on-demand traces).
  mode_t mode = 0666;
  // When not -1: `path` is a name in this open directory, and the file is created there with
  // openat and renamed with renameat, following no symbolic link, whatever becomes of the
  // directory's path meanwhile. The descriptor stays the caller's.
  int dir_fd = -1;
};

// A file written under a temporary name in the destination's directory and renamed over the
// destination at commit. Shared by the file sinks. A destination that is a character device or
// a FIFO (/dev/stdout, /dev/null, a named pipe), or a link to one, is written in place
// instead: replacing it would turn the device into a regular file. Any other kind of file
// (a socket, a block device, a directory) is refused.
class TempFile {
 public:
  TempFile(std::string path, const FileSinkOptions& options);
  ~TempFile();  // removes the temporary unless committed
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const char* data, std::size_t size);
  // Writes all of `data` and returns 0, or the errno of the failure; the temporary stays.
  // Safe on another thread than the one that owns this file (the only other use of it).
  int write_all(const char* data, std::size_t size) noexcept;
  void commit();
  // Throws the Error for this file with `reason`, after removing the temporary.
  [[noreturn]] void fail(const std::string& reason);

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  std::string what_;
  bool fsync_;
  int dir_fd_ = AT_FDCWD;  // where path_ and temp_path_ are resolved
  bool in_place_ = false;  // a device or FIFO, written directly
  int fd_ = -1;
  bool committed_ = false;
  int signal_slot_ = -1;  // where the temporary is listed for remove_temporaries_on_signal()
};

// Gathers writes into large buffers and hands each full one to a thread of its own that
// consumes it (write(), or deflate and write()) while the caller fills the next: exporting
// formats and writes at the same time. Used by the file sinks.
//
// The thread starts when the first buffer fills, so a small output (a few KB, consumed at
// finish() on the caller's thread) never pays for one, and if no thread can be started the
// buffers are consumed on the caller's thread. Memory is bounded: kBuffers buffers of
// kBufferBytes, and the caller waits while all are in flight.
class BufferPipeline {
 public:
  // Consumes one block and returns 0 or an errno value (or a negative code the owner knows).
  // Runs on the pipeline's thread, or on the caller's when there is none; never on both at
  // once. Must not throw: there is nobody on the pipeline's thread to catch it.
  using Consume = std::function<int(const char* data, std::size_t size)>;

  explicit BufferPipeline(Consume consume) : consume_(std::move(consume)) {}
  ~BufferPipeline() { cancel(); }
  BufferPipeline(const BufferPipeline&) = delete;
  BufferPipeline& operator=(const BufferPipeline&) = delete;

  // Copies `bytes` in. Returns 0, or the first error of a consume, here or earlier on the
  // thread; the thread has then stopped, and nothing more is consumed.
  int write(std::string_view bytes);
  // Consumes everything written and stops the thread. Returns 0 or the first error.
  int finish();
  // Stops the thread, dropping what it has not consumed yet. Never throws.
  void cancel() noexcept;

  // One being filled, up to two in flight: enough to keep both threads busy. 1 MiB beat
  // 2 and 4 MiB in bench/export_bench (22.7 vs 22.0 and 16 M events/s): the buffers stay in
  // cache between the two threads, and fresh ones cost fewer page faults.
  static constexpr std::size_t kBuffers = 3;
  static constexpr std::size_t kBufferBytes = 1 << 20;

 private:
  int hand_off();  // the current buffer is full: pass it on, get the next
  void submit();
  void stop() noexcept;
  void run() noexcept;  // the thread

  Consume consume_;
  std::array<std::unique_ptr<char[]>, kBuffers> buffers_;
  std::array<std::size_t, kBuffers> sizes_{};
  std::size_t used_ = 0;  // bytes in the buffer being filled, buffers_[head_ % kBuffers]
  bool inline_ = false;   // no thread could be started: consume on the caller's thread

  // Buffers tail_ to head_ - 1 wait for the thread, or are being consumed.
  std::mutex mutex_;
  std::condition_variable filled_;    // the thread waits for head_ to move, or stop_
  std::condition_variable consumed_;  // the caller waits for tail_ to move
  std::uint64_t head_ = 0;
  std::uint64_t tail_ = 0;
  bool stop_ = false;
  // Written under mutex_; read without it by write()'s fast path.
  std::atomic<int> error_{0};
  std::thread thread_;
};

class FileSink final : public Sink {
 public:
  explicit FileSink(std::string path, const FileSinkOptions& options = {});
  void write(std::string_view bytes) override;
  void commit() override;
  const std::string& temp_path() const { return file_.temp_path(); }

 private:
  TempFile file_;
  // Declared last so that it is destroyed first: its thread stops before file_ closes.
  BufferPipeline pipeline_;
};

class GzipFileSink final : public Sink {
 public:
  explicit GzipFileSink(std::string path, const FileSinkOptions& options = {});
  ~GzipFileSink() override;
  void write(std::string_view bytes) override;
  void commit() override;
  const std::string& temp_path() const { return file_.temp_path(); }

 private:
  int deflate_all(int flush) noexcept;

  TempFile file_;
  z_stream zs_{};
  std::vector<unsigned char> out_;
  bool committed_ = false;
  // Deflates on its thread; the destructor stops it before zs_ ends.
  BufferPipeline pipeline_;
};

// A FileSink, or a GzipFileSink when `path` ends in ".gz".
std::unique_ptr<Sink> open_file_sink(const std::string& path, const FileSinkOptions& options = {});

}  // namespace opscope::internal
