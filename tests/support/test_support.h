// Helpers shared by the tests: temporary directories, warning capture, file reading.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "opscope/error.h"
#include "opscope/value.h"

namespace opscope::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A fresh directory for Unix socket files, removed with everything in it: directly under
// /tmp ("/tmp/opscope-sock-XXXXXX"), whatever TMPDIR or the build directory is, so that a
// socket path always fits sockaddr_un's 108 bytes.
class SocketDir {
 public:
  SocketDir();
  ~SocketDir();
  SocketDir(const SocketDir&) = delete;
  SocketDir& operator=(const SocketDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Collects warnings for its lifetime instead of printing them.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  const std::vector<std::string>& messages() const { return *messages_; }
  bool contains(std::string_view needle) const;

 private:
  std::shared_ptr<std::vector<std::string>> messages_;
  WarningHandler previous_;
};

// Runs `fn` and returns the message of the opscope::Error it throws, or "(no error)", so a
// test can assert on what a failure says.
std::string error_of(const std::function<void()>& fn);

// Recorded inputs as a finished window holds them: a float CPU tensor, an int scalar.
RecordedValue recorded_tensor(std::vector<std::int64_t> sizes);
RecordedValue recorded_int(std::int64_t i);

std::string read_file(const std::string& path);

// Why perf cannot sample this process here ("" when it can): probed once per process by
// profiling a short busy loop with the built-in perf sampler. Tests that need real samples
// GTEST_SKIP() with this text, so the reason reaches the log.
const std::string& perf_unavailable_reason();
// In a forked child that runs as a throwaway uid (54321: no such user need exist, and none is
// created), binds the exact Unix datagram address `from` (sun_path bytes, NULs included) and
// sends `datagram` `times` times to the exact address `to`. Returns the child's exit code, 0
// when everything was sent. Needs root (the tests that use it skip otherwise).
int send_datagram_as_another_user(const std::string& from, const std::string& to,
                                  const std::string& datagram, int times = 1);

// Decompresses a gzip file.
std::string read_gzip_file(const std::string& path);

}  // namespace opscope::testing
