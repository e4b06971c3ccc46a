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
// device". A sink is used by one thread at a time.
#pragma once

#include <zlib.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::internal {

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
  void write(std::string_view bytes) override { data_.append(bytes); }
  void commit() override { committed_ = true; }

  bool committed() const { return committed_; }
  const std::string& data() const { return data_; }
  std::string take() { return std::move(data_); }
  // Reserves room for `n` bytes; see sink.cpp for the large case.
  void reserve(std::size_t n);
  // Empties the sink but keeps its memory, to reuse it.
  void clear() {
    data_.clear();
    committed_ = false;
  }

 private:
  std::string data_;
  bool committed_ = false;
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
};

// A file written under a temporary name in the destination's directory and renamed over the
// destination at commit. Shared by the file sinks.
class TempFile {
 public:
  TempFile(std::string path, const FileSinkOptions& options);
  ~TempFile();  // removes the temporary unless committed
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const char* data, std::size_t size);
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
  int fd_ = -1;
  bool committed_ = false;
};

class FileSink final : public Sink {
 public:
  explicit FileSink(std::string path, const FileSinkOptions& options = {});
  void write(std::string_view bytes) override;
  void commit() override;
  const std::string& temp_path() const { return file_.temp_path(); }

 private:
  void flush();

  TempFile file_;
  std::vector<char> buffer_;  // gathers small writes into large ones
  std::size_t used_ = 0;
};

class GzipFileSink final : public Sink {
 public:
  explicit GzipFileSink(std::string path, const FileSinkOptions& options = {});
  ~GzipFileSink() override;
  void write(std::string_view bytes) override;
  void commit() override;
  const std::string& temp_path() const { return file_.temp_path(); }

 private:
  void deflate_all(int flush);

  TempFile file_;
  z_stream zs_{};
  std::vector<unsigned char> out_;
  bool committed_ = false;
};

// A FileSink, or a GzipFileSink when `path` ends in ".gz".
std::unique_ptr<Sink> open_file_sink(const std::string& path,
                                     const FileSinkOptions& options = {});

}  // namespace opscope::internal
