// A program that records under a flight recorder armed for crashes, then fails as asked:
//   flight_crash_child DIR abort|segv|throw|exit
// "throw" lets an exception leave main; "exit" returns normally (no dump may be left).
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "opscope/flight_recorder.h"
#include "opscope/record_function.h"

namespace {

void fail(const char* mode) {
  OPSCOPE_RECORD_FUNCTION("child::fail");
  if (std::strcmp(mode, "abort") == 0) std::abort();
  if (std::strcmp(mode, "segv") == 0) {
    // An address computed at run time, so that the compiler cannot see a null store.
    auto* volatile p = reinterpret_cast<volatile int*>(std::strtoul("16", nullptr, 10));
    *p = 1;
  }
  if (std::strcmp(mode, "throw") == 0) throw std::runtime_error("child: thrown past main");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  opscope::FlightRecorder recorder(
      {.keep_seconds = 60, .max_bytes = 1 << 20, .dump_dir = argv[1], .dump_on_crash = true});
  for (int i = 0; i < 100; ++i) {
    OPSCOPE_RECORD_FUNCTION("child::warmup");
  }
  {
    opscope::RecordFunction named(std::string("child::dynamic_") + "name",
                                  opscope::RecordScope::kUserScope);
  }
  OPSCOPE_USER_SCOPE("child::step");
  if (std::strcmp(argv[2], "exit") != 0) fail(argv[2]);
  return 0;
}
