// The message of the UsageError that parsing a command line throws, for the CLI tests.
#pragma once

#include <string>
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

}  // namespace opscope::cli::tests
