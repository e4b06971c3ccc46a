// child_process.h: the sampler's helper processes (perf record, perf script), started with
// posix_spawn so that starting one from a multi-threaded program is safe, and waited for with
// deadlines so that a hung sampler never hangs the program.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace opscope::sampling {

class ChildProcess {
 public:
  // Starts argv[0] (looked up in PATH unless it holds a '/') with stdin from /dev/null, stdout
  // written to `stdout_path` and stderr to `stderr_path` (the same file when equal). Throws
  // opscope::Error naming the program and errno's text when it cannot be started (ENOENT:
  // not installed).
  ChildProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
               const std::string& stderr_path);
  // Kills the process if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The wait status once the process ended (checked without blocking), else nothing.
  std::optional<int> poll();
  // Waits up to `timeout` for the process to end; its wait status, or nothing on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // SIGKILL and reap.
  void kill() noexcept;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// "exited with status 1", "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// argv joined by spaces, for messages.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace opscope::sampling
