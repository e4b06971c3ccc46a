// `opscope analyze --format html`: one self-contained page (and the text tables' long names) with
// every table, and charts a browser really draws: rendered by headless Chromium, screenshotted, and
// the PNG decoded to check each chart's parts are painted in their colours (and an absent part is
// not). The screenshot is skipped when Chromium is not installed.
//
// Set OPSCOPE_TEST_ARTIFACTS to a directory to keep the page and its screenshot there.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "support/cli_test_support.h"
#include "support/png_screenshot.h"
#include "support/test_support.h"

namespace opscope {
namespace report_html_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using testing::count_color;
using testing::decode_png;
using testing::find_chromium;
using testing::Image;
using testing::read_file;
using testing::TempDir;

std::size_t occurrences(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

// Two ranks' temporal breakdown, two streams' idle time (no kernel_wait anywhere), kernel
// types, and one kernel's durations on two ranks.
std::vector<Report> sample_reports() {
  Report temporal{
      "temporal",
      {"rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
       "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"},
      {{std::int64_t{0}, 500.0, 300.0, 200.0, 1000.0, 50.0, 30.0, 20.0},
       {std::int64_t{1}, 100.0, 600.0, 300.0, 1000.0, 10.0, 60.0, 30.0}}};
  Report idle{"idle",
              {"rank", "stream", "idle_category", "idle_time", "idle_time_ratio"},
              {{std::int64_t{0}, std::int64_t{7}, std::string("host_wait"), 400.0, 0.8},
               {std::int64_t{0}, std::int64_t{7}, std::string("other"), 100.0, 0.2},
               {std::int64_t{1}, std::int64_t{7}, std::string("host_wait"), 50.0, 0.5},
               {std::int64_t{1}, std::int64_t{7}, std::string("other"), 50.0, 0.5}}};
  Report types{"kernel_type",
               {"kernel_type", "sum", "percentage"},
               {{std::string("COMPUTATION"), std::int64_t{900}, 75.0},
                {std::string("COMMUNICATION <&>"), std::int64_t{300}, 25.0}}};
  Report dist{"kernel_dist",
              {"kernel_type", "name", "rank", "count", "sum (us)", "mean (us)", "min (us)", "25%",
               "50%", "75%", "max (us)"},
              {{std::string("COMPUTATION"), std::string("gemm"), std::int64_t{0}, std::int64_t{4},
                40.0, 10.0, 5.0, 8.0, 10.0, 12.0, 15.0},
               {std::string("COMPUTATION"), std::string("gemm"), std::int64_t{1}, std::int64_t{4},
                80.0, 20.0, 10.0, 16.0, 20.0, 24.0, 30.0}}};
  return {temporal, idle, types, dist};
}

TEST(ReportHtml, OnePageWithEveryRowEscapedAndNothingFetched) {
  const std::vector<Report> reports = sample_reports();
  const std::string html = format_reports(reports, ReportFormat::kHtml);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  for (const char* needle :
       {"http:", "https:", "<script", "<link", "<img", "<iframe", "src=", "url(", "@import"}) {
    EXPECT_EQ(html.find(needle), std::string::npos) << needle;
  }
  // Links only within the page (its table of contents).
  EXPECT_EQ(occurrences(html, "href="), occurrences(html, "href=\"#"));
  EXPECT_EQ(occurrences(html, "href=\"#"), reports.size());
  // Every row of every table (a header row each, then its rows).
  std::size_t rows = 0;
  for (const Report& r : reports) rows += 1 + r.rows.size();
  EXPECT_EQ(occurrences(html, "<tr>"), rows);
  EXPECT_EQ(occurrences(html, "<svg"), 4u) << "a chart for each of the four reports";
  EXPECT_NE(html.find("COMMUNICATION &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(html.find("COMMUNICATION <&>"), std::string::npos);
  // A report without a chart is a table only.
  const Report ops{"ops", {"Name"}, {{std::string("aten::mm")}}};
  const std::string table_only = format_reports({&ops, 1}, ReportFormat::kHtml);
  EXPECT_EQ(table_only.find("<svg"), std::string::npos);
  EXPECT_NE(table_only.find("<td>aten::mm</td>"), std::string::npos);
}

// Text tables shorten a long name (a templated kernel's runs to thousands of bytes) in the
// middle, never inside a UTF-8 character; JSON, CSV and HTML keep it whole.
TEST(ReportText, LongNamesAreShortenedInTextOnly) {
  const std::string name = "void at::native::kernel<" + std::string(300, 'T') + "é>(int, float)";
  const Report r{"kernels", {"name", "sum (us)"}, {{name, 1.5}, {std::string("short"), 2.0}}};
  const std::string text = format_reports({&r, 1}, ReportFormat::kText);
  EXPECT_EQ(text.find(name), std::string::npos);
  const std::size_t dots = text.find("...");
  ASSERT_NE(dots, std::string::npos) << text;
  EXPECT_NE(text.find("void at::native::kernel<TTT"), std::string::npos) << text;
  EXPECT_NE(text.find("TTé>(int, float)"), std::string::npos) << text;
  // Every line of the table is at most the shortened name, two spaces and the number.
  for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
    EXPECT_LE(end - at, 100u + 2 + 8) << text.substr(at, end - at);
  }
  EXPECT_NE(text.find("short"), std::string::npos);
  for (const ReportFormat f : {ReportFormat::kJson, ReportFormat::kCsv}) {
    EXPECT_NE(format_reports({&r, 1}, f).find(name), std::string::npos) << static_cast<int>(f);
  }
  EXPECT_NE(format_reports({&r, 1}, ReportFormat::kHtml)
                .find(std::string(300, 'T') + "é&gt;(int, float)"),
            std::string::npos);
}

struct Swatch {
  const char* part;
  std::array<std::uint8_t, 3> rgb;
};

TEST(ReportHtml, ChromiumDrawsEveryChartPartPresentAndNoOther) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "Chromium is not installed (Debian: apt install chromium)";
  TempDir dir;
  const std::string page = dir.file("report.html");
  {
    const std::vector<Report> reports = sample_reports();
    std::ofstream(page) << format_reports(reports, ReportFormat::kHtml);
  }
  const std::string png = dir.file("report.png");
  const std::string failure =
      testing::screenshot(chromium, page, png, dir.path().string(), 1100, 1400);
  ASSERT_TRUE(failure.empty()) << failure;
  if (const char* keep = std::getenv("OPSCOPE_TEST_ARTIFACTS"); keep != nullptr && *keep) {
    std::error_code ec;
    fs::create_directories(keep, ec);
    for (const std::string& f : {page, png}) {
      fs::copy_file(f, fs::path(keep) / fs::path(f).filename(),
                    fs::copy_options::overwrite_existing, ec);
    }
  }
  std::string error;
  const std::optional<Image> image = decode_png(read_file(png), &error);
  ASSERT_TRUE(image) << error;
  // Each part in the charts covers an area in its CSS colour.
  constexpr Swatch kDrawn[] = {
      {"compute", {0x2e, 0x8b, 0x57}},             // seagreen
      {"non-compute", {0xff, 0x8c, 0x00}},         // darkorange
      {"idle", {0xc0, 0xc0, 0xc0}},                // silver
      {"host_wait", {0xdc, 0x14, 0x3c}},           // crimson
      {"other", {0x80, 0x80, 0x80}},               // gray
      {"kernel types", {0x93, 0x70, 0xdb}},        // mediumpurple
      {"kernel duration box", {0x00, 0x80, 0x80}}  // teal
  };
  for (const Swatch& s : kDrawn) {
    // Bars are 22 pixels high and at least tens of pixels long; the legend's swatch alone is
    // 14 x 14 = 196.
    EXPECT_GE(count_color(*image, s.rgb), 400u) << s.part << " is not drawn";
  }
  // No stream waited on back-to-back kernels: kernel_wait (royalblue) is in the legend only.
  EXPECT_LE(count_color(*image, {0x41, 0x69, 0xe1}), 250u) << "kernel_wait is drawn";
  // Rank 0 idles half of its GPU time and rank 1 a tenth: silver covers 300 + 60 pixels of
  // their 22-pixel bars (600 pixels for 100 %), plus its legend swatch and antialiased edges;
  // a chart drawn to another scale would be thousands of pixels off.
  const std::size_t idle = count_color(*image, {0xc0, 0xc0, 0xc0});
  EXPECT_GE(idle, (300u + 60u) * 22u);
  EXPECT_LE(idle, (300u + 60u) * 22u + 1200u);
}

// The command line writes the page for real traces.
TEST(ReportHtml, AnalyzeWritesThePageForRealTraces) {
  const std::string dir = std::string(OPSCOPE_PEERS_DIR) + "/kineto-traces/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  TempDir out;
  const std::string page = out.file("analysis.html");
  const auto [code, text] = shell(std::string(OPSCOPE_CLI) + " analyze " + dir +
                                  " --report temporal,idle,kernels --format html --output " + page);
  ASSERT_EQ(code, 0) << text;
  const std::string html = read_file(page);
  for (const char* section : {"id=\"temporal\"", "id=\"idle\"", "id=\"kernel_type\"",
                              "id=\"kernels\"", "GPU time per rank", "Idle time per stream",
                              "GPU time by kernel type", "rank 1, stream 7"}) {
    EXPECT_NE(html.find(section), std::string::npos) << section;
  }
}

}  // namespace report_html_test
}  // namespace opscope
