// The trace-format table: a format chosen by name or by the file's suffix, every writer of a
// trace going through it, and unknown names and suffixes refused with what is known.
#include "export/trace_formats.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "opscope/error.h"
#include "opscope/export.h"
#include "support/test_support.h"

namespace opscope {
namespace trace_formats_test {

using testing::error_of;
using testing::read_file;
using testing::read_gzip_file;
using testing::TempDir;

std::shared_ptr<const ProfilerResult> small_result() {
  ProfilerResult::Builder b;
  const std::int32_t t = b.add_thread({77, "main"});
  Event e;
  e.name = "aten::mm";
  e.thread = t;
  e.start_ns = 1'700'000'000'000'000'000;
  e.end_ns = e.start_ns + 2500;
  e.handle = 1;
  b.add_event(e);
  b.set_pid(4242);
  return b.finish();
}

TEST(TraceFormatsTest, SuffixesPickTheChromeRowAndTheLongestSuffixWins) {
  ASSERT_FALSE(internal::trace_formats().empty());
  EXPECT_EQ(internal::trace_format_for("a/run.json").name, "chrome");
  EXPECT_EQ(internal::trace_format_for("run.pt.trace.json.gz").name, "chrome");
  EXPECT_EQ(internal::trace_format_by_suffix("run.txt"), nullptr);
  EXPECT_EQ(internal::trace_format_for("run.txt", "chrome").name, "chrome");
}

TEST(TraceFormatsTest, UnknownNamesAndSuffixesSayWhatIsKnown) {
  const auto r = small_result();
  TempDir dir;
  const std::string by_suffix = error_of([&] { export_trace(*r, dir.file("run.txt")); });
  EXPECT_NE(by_suffix.find("run.txt"), std::string::npos) << by_suffix;
  EXPECT_NE(by_suffix.find("chrome (.json, .json.gz)"), std::string::npos) << by_suffix;
  const std::string by_name =
      error_of([&] { export_trace(*r, dir.file("run.json"), "perfetto-proto"); });
  EXPECT_NE(by_name.find("'perfetto-proto'"), std::string::npos) << by_name;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("run.txt")));
}

// export_trace by suffix, export_chrome_trace whatever the name, and the in-memory document:
// one writer, byte for byte (traceName aside: it is the path written to).
TEST(TraceFormatsTest, EveryWayOfWritingChromeWritesTheSameDocument) {
  const auto r = small_result();
  TempDir dir;
  const std::string plain = dir.file("a.json");
  const std::string gz = dir.file("b.json.gz");
  const std::string odd = dir.file("c.trace");
  export_trace(*r, plain);
  export_trace(*r, gz);
  export_chrome_trace(*r, odd);
  EXPECT_EQ(read_file(plain), chrome_trace_json(*r, plain));
  EXPECT_EQ(read_gzip_file(gz), chrome_trace_json(*r, gz));
  EXPECT_EQ(read_file(odd), chrome_trace_json(*r, odd));
}

}  // namespace trace_formats_test
}  // namespace opscope
