// Helpers shared by the CLI tests (ondemand_cli_test.cpp, sample_cli_test.cpp).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"

namespace opscope::cli::tests {

// parse(args)'s UsageError message, or "(no error)" when the line parses.
inline std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs a command line in a shell; its exit code (128+N when signal N ended it) and its
// stdout and stderr together.
inline std::pair<int, std::string> shell(const std::string& command) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace opscope::cli::tests
