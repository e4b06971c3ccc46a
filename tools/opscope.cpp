// The `opscope` executable: wiring only; the logic is in tools/cli.cpp, src/ondemand/ and
// src/daemon/.
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"

int main(int argc, char** argv) {
  return opscope::cli::run(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
