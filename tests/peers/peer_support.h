// Helpers of the tests against real peers (opscope_peer_tests): child processes with their
// output in a file, the peers' paths, and waiting for files and lines.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace opscope::peers {

// Why the private network namespace could not be entered ("" when it was): peer_main.cpp sets
// it, and every peer test skips with it.
void set_namespace_error(std::string error);
const std::string& namespace_error();

// A started process; stdout and stderr go to `log`. Killed (SIGKILL) and reaped on destruction.
class Child {
 public:
  // `env` entries ("NAME=value") are added to this process's environment.
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string log);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  std::string output() const;
  // Sends `sig` and waits for the exit; returns the exit code (128+N for signal N).
  int stop(int sig);
  bool running();
  // Waits until the output has a line starting with `prefix`; returns that line.
  std::optional<std::string> wait_for_line(const std::string& prefix,
                                           std::chrono::milliseconds timeout) const;

 private:
  pid_t pid_ = -1;
  std::string log_;
  bool reaped_ = false;
};

// Runs argv to completion (at most `timeout`); its exit code and its output (stdout + stderr).
std::pair<int, std::string> run(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                const std::vector<std::string>& env = {});

bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace opscope::peers
