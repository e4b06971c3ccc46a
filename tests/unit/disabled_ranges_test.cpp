// The compile-out switch and the weight of the hot-path header. This file is compiled with
// OPSCOPE_DISABLE (defined below, before any opscope header): its macros must record nothing
// and evaluate nothing, while the rest of the test binary records as usual.
#define OPSCOPE_DISABLE 1

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace disabled_ranges_test {

int g_evaluated = 0;

opscope::Value counted_tensor() {
  ++g_evaluated;
  return opscope::Value::tensor({2, 3});
}

TEST(CompileOut, DisabledMacrosRecordAndEvaluateNothing) {
  opscope::ProfilerConfig config;
  config.lenses.record_shapes = true;  // would evaluate the inputs if the macro were compiled in
  opscope::Profiler prof(std::move(config));
  prof.start();
  for (int i = 0; i < 3; ++i) {
    OPSCOPE_RECORD_FUNCTION("disabled::function");
    OPSCOPE_USER_SCOPE("disabled::user_scope");
    OPSCOPE_BACKWARD_FUNCTION("disabled::backward");
    OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("disabled::with_inputs", counted_tensor());
  }
  // The classes stay usable where code names them directly.
  { opscope::RecordFunction direct("enabled::direct", opscope::RecordScope::kUserScope); }
  prof.stop();
  EXPECT_EQ(g_evaluated, 0);
  int direct = 0;
  for (const auto& e : prof.events()) {
    EXPECT_EQ(e.name.find("disabled::"), std::string_view::npos) << e.name;
    direct += e.name == "enabled::direct";
  }
  EXPECT_EQ(direct, 1);
}

// The header every file with a range includes stays light (issue 18: at most 75 k lines
// preprocessed; it was 144 k with <functional>, <chrono> and <x86intrin.h>).
TEST(CompileOut, RecordFunctionHeaderStaysLight) {
  const std::string command = std::string("echo '#include \"opscope/record_function.h\"' | ") +
                              OPSCOPE_CXX_COMPILER + " -std=c++20 -O2 -E -x c++ - -I" +
                              OPSCOPE_SOURCE_DIR + "/include 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  long lines = 0;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe) != nullptr) {
    if (std::string(buf).find('\n') != std::string::npos) ++lines;
  }
  ASSERT_EQ(pclose(pipe), 0) << command;  // the compiler's status: the header compiled
  EXPECT_GT(lines, 1000);                 // the header and its includes were really read
  EXPECT_LE(lines, 75'000);
}

}  // namespace disabled_ranges_test
