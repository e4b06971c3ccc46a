// Runs a measurement in a forked child, for benchmarks of what a process pays the first time
// (its first window, stop() or export): the child has recorded nothing before, whatever the
// benchmark program measured earlier. Not a benchmark program itself (bench/CMakeLists.txt
// builds *_bench.cpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <type_traits>

// Calls `measure` in a child process and returns what it returned (a trivially copyable
// value, sent back through a pipe), or nullopt when the child failed.
template <typename Measure>
auto in_fresh_process(Measure measure) -> std::optional<decltype(measure())> {
  using Result = decltype(measure());
  static_assert(std::is_trivially_copyable_v<Result>);
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fds[0]);
    const Result mine = measure();
    const bool ok = write(fds[1], &mine, sizeof mine) == static_cast<ssize_t>(sizeof mine);
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  Result got{};
  const bool complete = read(fds[0], &got, sizeof got) == static_cast<ssize_t>(sizeof got);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!complete || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return got;
}
