// The importer table (src/import/importer.h): each format is told by the head of its text, the
// files that are not traces are refused with what they are, and a text no row knows falls to
// the Kineto importer, whose errors say what a Chrome trace must hold.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "import/importer.h"
#include "import/trace_text.h"
#include "opscope/error.h"
#include "opscope/trace_reader.h"
#include "support/test_support.h"

namespace opscope::import {
namespace importers_test {

namespace fs = std::filesystem;

std::string peers(const std::string& rel) { return std::string(OPSCOPE_PEERS_DIR) + "/" + rel; }

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("opscope_importers_test_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string read_error(const std::string& path) {
  return testing::error_of([&] { read_trace(path); });
}

// The head of a real file picks its row; read_trace() gives that row's message.
TEST(Importers, RealFilesThatAreNotTracesAreToldByTheirHead) {
  struct Case {
    std::string path;
    std::string_view importer;
    std::string_view message;
  };
  const Case cases[] = {
      {peers("kineto-traces/execution_trace/benchmark_simple_add_et.json.gz"),
       "PyTorch execution trace (Chakra)", kExecutionTrace},
      {peers("kineto-traces/memory_analysis/memory_timeline.raw.gz"), "raw memory timeline",
       kRawMemoryTimeline},
      {peers("kineto-traces/execution_trace/benchmark_simple_add_trace.json.gz"),
       "Kineto / Chrome trace JSON", ""},
  };
  for (const Case& c : cases) {
    if (!fs::exists(c.path)) GTEST_SKIP() << "no " << c.path << " (../shared/peers)";
    const std::string head = read_text_head(c.path, kHeadBytes);
    ASSERT_FALSE(head.empty()) << c.path;
    EXPECT_EQ(importer_for(head).name, c.importer) << c.path;
    if (c.message.empty()) {
      EXPECT_NO_THROW(read_trace(c.path)) << c.path;
    } else {
      EXPECT_EQ(read_error(c.path), "cannot read trace " + c.path + ": " + std::string(c.message));
    }
  }
}

// The sniffs look at the top level only: "nodes" inside a value, or after "traceEvents", is not
// an execution trace; an array of anything but arrays of numbers is no memory timeline.
TEST(Importers, SniffsLookAtTheTopLevelOnly) {
  EXPECT_TRUE(sniff_execution_trace(R"({"schema": "1.0.1", "pid": 7, "nodes": [{"name": "a")"));
  EXPECT_TRUE(sniff_execution_trace(" \n{\"nodes\":[]}"));
  EXPECT_FALSE(sniff_execution_trace(R"({"traceEvents": [], "nodes": []})"));
  EXPECT_FALSE(sniff_execution_trace(R"({"meta": {"nodes": 1}, "traceEvents": [)"));
  EXPECT_FALSE(sniff_execution_trace(R"({"name": "nodes", "traceEvents": [)"));
  EXPECT_FALSE(sniff_execution_trace(R"({"a\"nodes": 1})"));
  EXPECT_FALSE(sniff_execution_trace("[{\"nodes\": 1}]"));
  EXPECT_TRUE(sniff_raw_memory_timeline("[[-1, 1, 37888, 7], [0, 2, 512, 7]]"));
  EXPECT_TRUE(sniff_raw_memory_timeline(" [ [12"));
  EXPECT_FALSE(sniff_raw_memory_timeline("[]"));
  EXPECT_FALSE(sniff_raw_memory_timeline("[[\"a\"]]"));
  EXPECT_FALSE(sniff_raw_memory_timeline(R"({"traceEvents": [[1]]})"));
  EXPECT_EQ(importer_for("").name, "Kineto / Chrome trace JSON");
}

// A text no row knows is the Kineto importer's to refuse, with the messages it always gave.
TEST(Importers, AnUnknownTextFallsToTheKinetoImportersError) {
  EXPECT_EQ(importer_for("hello").name, importers().back().name);
  const std::string text = write_file("unknown.json", "hello");
  EXPECT_EQ(read_error(text), "cannot read trace " + text + ": " + std::string(kNotAnObject));
  // Not JSON (no value after "ts":): refused as such, at its byte, whatever is read of it
  // (issue 40); it was told by the reading of "ts".
  const std::string bad = write_file("bad.json", R"({"traceEvents": [{"ph": "X", "ts": }]})");
  // The missing value is named by its byte (times are read once their event is whole, so the
  // strict parser finds the hole first).
  EXPECT_EQ(read_error(bad), "cannot read trace " + bad +
                                 ": malformed JSON at byte 35 (in the event that starts at byte "
                                 "17): expected a value");
  // Both "nodes" and "traceEvents": a Chrome trace, as it always was.
  const std::string both = write_file("both.json", R"({"nodes": [], "traceEvents": []})");
  EXPECT_EQ(importer_for(R"({"nodes": [], "traceEvents": []})").name, importers().back().name);
  EXPECT_NO_THROW(read_trace(both));
  const std::string array = write_file("array.json", R"(["a", "b"])");
  EXPECT_EQ(read_error(array), "cannot read trace " + array + ": " + std::string(kNotAnObject));
  const std::string no_events = write_file("no_events.json", R"({"schemaVersion": 1})");
  EXPECT_EQ(read_error(no_events), "cannot read trace " + no_events +
                                       ": no \"traceEvents\" array in the top-level object");
  const std::string missing = (fs::temp_directory_path() / "opscope_importers_test_none").string();
  EXPECT_NE(read_error(missing).find("cannot read trace " + missing + ": "), std::string::npos);
}

}  // namespace importers_test
}  // namespace opscope::import
