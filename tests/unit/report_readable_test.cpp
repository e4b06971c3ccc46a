// The reports as a person reads them, with the real traces' longest names (issue 38, findings 3,
// 4 and 7): names shortened in the middle stay distinct, and the HTML pages keep every number
// on screen, their labels whole and their rows a few lines high, which headless Chromium's
// screenshots show in pixels. The screenshots are skipped when Chromium is not installed, and
// the real traces' tests when ../shared/peers is absent.
//
// Set OPSCOPE_TEST_ARTIFACTS to a directory to keep the pages and their screenshots there.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "export/short_names.h"
#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/png_screenshot.h"
#include "support/test_support.h"

namespace opscope {
namespace report_readable_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using testing::decode_png;
using testing::find_chromium;
using testing::Image;
using testing::read_file;
using testing::TempDir;

const std::string kPeers = std::string(OPSCOPE_PEERS_DIR);
const std::string kTraceFilter = kPeers + "/kineto-traces/trace_filter";
// Two cutlass kernels whose mangled names run to 1,654 and 1,687 characters.
const std::string kNccl = kPeers + "/kineto-traces/nccl_parser_config/nccl_data.json.gz";
constexpr const char* kCta =
    "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1";
constexpr const char* kWarp =
    "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1";

std::vector<std::shared_ptr<const ProfilerResult>> trace_filter_ranks(
    const std::vector<std::string>& reports) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kTraceFilter)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return read_traces(files, 0, what_reports_read(reports));
}

// `s` as the page writes it.
std::string escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// --- finding 4: names shortened in the middle stay distinct ---------------------------------

TEST(ReportNames, TextKernelsTableShowsRealTemplatedKernelsApart) {
  if (!fs::exists(kTraceFilter)) GTEST_SKIP() << "no " << kTraceFilter;
  const auto ranks = trace_filter_ranks({"kernels"});
  std::size_t checked = 0;
  for (const Report& r : run_report("kernels", ranks)) {
    if (r.name != "kernels") continue;
    ASSERT_EQ(r.columns[0], "name");
    const std::string text = format_reports({&r, 1}, ReportFormat::kText);
    std::vector<std::string> lines;
    for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
      lines.push_back(text.substr(at, end - at));
    }
    ASSERT_EQ(lines.size(), 3 + r.rows.size()) << text;
    const std::size_t width = lines[2].find(' ');  // the rule under the name column
    // What each line shows of its name, and the full names shown so.
    std::map<std::string, std::set<std::string>> full_of;
    bool cta = false, warp = false;
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
      std::string shown = lines[3 + i].substr(0, width);
      while (!shown.empty() && shown.back() == ' ') shown.pop_back();
      const std::string& full = std::get<std::string>(r.rows[i][0]);
      EXPECT_LE(shown.size(), 100u);
      full_of[shown].insert(full);
      if (full.find(kCta) != std::string::npos)
        cta = shown.find("cta_per_row_1") != std::string::npos;
      if (full.find(kWarp) != std::string::npos) {
        warp = shown.find("warp_per_row_1") != std::string::npos;
      }
      ++checked;
    }
    for (const auto& [shown, fulls] : full_of) {
      EXPECT_EQ(fulls.size(), 1u) << "one text for " << fulls.size() << " names: " << shown;
    }
    EXPECT_TRUE(cta) << "the cta_per_row_1 kernel is not shown as such:\n" << text;
    EXPECT_TRUE(warp) << "the warp_per_row_1 kernel is not shown as such:\n" << text;
  }
  EXPECT_GT(checked, 0u);
}

TEST(ReportNames, HtmlKernelDistributionTitlesAreDistinct) {
  if (!fs::exists(kTraceFilter)) GTEST_SKIP() << "no " << kTraceFilter;
  const auto ranks = trace_filter_ranks({"kernel-dist"});
  const std::vector<Report> reports = run_report("kernel-dist", ranks);
  const std::string html = format_reports(reports, ReportFormat::kHtml);
  // The kernels charted: the distinct names of the table's name column.
  std::set<std::string> kernels;
  for (const Report& r : reports) {
    const auto at = std::find(r.columns.begin(), r.columns.end(), "name");
    if (r.name != "kernel_dist" || at == r.columns.end()) continue;
    for (const auto& row : r.rows)
      kernels.insert(std::get<std::string>(row[at - r.columns.begin()]));
  }
  ASSERT_GE(kernels.size(), 3u);
  // Each kernel's title (after its full name as the tooltip, where there is one) is its own.
  const std::regex title(R"re(class="kernel">(?:<title>[^<]*</title>)?([^<]*)</text>)re");
  std::set<std::string> titles;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), title);
       it != std::sregex_iterator(); ++it) {
    titles.insert((*it)[1]);
  }
  EXPECT_EQ(titles.size(), kernels.size()) << "kernels charted under one title";
  for (const std::string& k : kernels) {
    EXPECT_NE(html.find("<title>" + escaped(k) + "</title>"), std::string::npos) << k;
  }
}

// Names alike in start, end and around where they first differ (unweighted_kernel_cta vs
// weighted_kernel_cta, in 40 bytes) get more room until they show apart; each stays within
// the room it needed, never cut inside a UTF-8 character.
TEST(ReportNames, NamesAlikeInEveryShortFormGetMoreRoom) {
  const std::string args = "<c10::Half, float>(" + std::string(400, 'x') + "é, float, long)";
  const std::vector<std::string> names = {
      "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1" +
          args,
      "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1" +
          args,
      "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_cta_per_row_1" + args,
      "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_warp_per_row_1" + args,
      "short",
      "short"};
  for (const std::size_t max : {24, 40, 60, 100, 110}) {
    const std::vector<std::string> shown = internal::shortened_names(names, max, "…");
    ASSERT_EQ(shown.size(), names.size());
    EXPECT_EQ(std::set<std::string>(shown.begin(), shown.begin() + 4).size(), 4u) << max;
    EXPECT_EQ(shown[4], "short");
    EXPECT_EQ(shown[5], "short");
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_LT(shown[i].size(), names[i].size()) << shown[i];
      EXPECT_LE(shown[i].size(), 8 * max) << shown[i];
      // Every byte sequence is whole UTF-8: é is never split.
      EXPECT_EQ(shown[i].find("\xc3…"), std::string::npos) << shown[i];
      EXPECT_EQ(shown[i].find("…\xa9"), std::string::npos) << shown[i];
    }
  }
}

// --- the pages in a browser -----------------------------------------------------------------

constexpr std::array<std::uint8_t, 3> kBorder = {0xcc, 0xcc, 0xcc};  // the tables' #ccc

bool near(std::array<std::uint8_t, 3> p, std::array<std::uint8_t, 3> c, int tolerance = 2) {
  for (int k = 0; k < 3; ++k) {
    if (std::abs(p[k] - c[k]) > tolerance) return false;
  }
  return true;
}

// Dark text (#222, antialiased).
bool ink(std::array<std::uint8_t, 3> p) { return p[0] < 110 && p[1] < 110 && p[2] < 110; }

// `html` as Chromium draws it in a window `width` pixels wide.
std::optional<Image> rendered(const std::string& html, const std::string& name, int width,
                              int height, std::string* error) {
  const std::string chromium = find_chromium();
  TempDir dir;
  const std::string page = dir.file(name + ".html");
  std::ofstream(page) << html;
  const std::string png = dir.file(name + ".png");
  *error = testing::screenshot(chromium, page, png, dir.path().string(), width, height);
  if (!error->empty()) return std::nullopt;
  if (const char* keep = std::getenv("OPSCOPE_TEST_ARTIFACTS"); keep != nullptr && *keep) {
    std::error_code ec;
    fs::create_directories(keep, ec);
    for (const std::string& f : {page, png}) {
      fs::copy_file(f, fs::path(keep) / fs::path(f).filename(),
                    fs::copy_options::overwrite_existing, ec);
    }
  }
  return decode_png(read_file(png), error);
}

// The tables' horizontal borders: rows of the image where border-coloured pixels run at least
// 150 pixels, each with where its run ends on the right.
struct Rule {
  std::uint32_t y;
  std::uint32_t right;
};
std::vector<Rule> rules(const Image& image) {
  std::vector<Rule> out;
  for (std::uint32_t y = 0; y < image.height; ++y) {
    std::uint32_t run = 0, best = 0, right = 0;
    for (std::uint32_t x = 0; x < image.width; ++x) {
      run = near(image.at(x, y), kBorder) ? run + 1 : 0;
      if (run > 0) right = x;
      best = std::max(best, run);
    }
    if (best >= 150) out.push_back({y, right});
  }
  return out;
}

// The left border of the tables: a column near the page's 24-pixel margin.
std::optional<std::uint32_t> left_border(const Image& image, const std::vector<Rule>& rs) {
  for (std::uint32_t x = 20; x < 30; ++x) {
    std::size_t n = 0;
    for (const Rule& r : rs) n += near(image.at(x, r.y + 1), kBorder) ? 1 : 0;
    if (n * 2 >= rs.size()) return x;
  }
  return std::nullopt;
}

// Every table row's height: the distance between two borders with the table's left border
// between them all the way.
std::vector<std::uint32_t> row_heights(const Image& image, const std::vector<Rule>& rs,
                                       std::uint32_t left) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 1; i < rs.size(); ++i) {
    if (rs[i].y == rs[i - 1].y + 1) continue;  // one border drawn two pixels thick
    bool inside = true;
    for (std::uint32_t y = rs[i - 1].y + 1; y < rs[i].y && inside; ++y) {
      inside = near(image.at(left, y), kBorder);
    }
    if (inside) out.push_back(rs[i].y - rs[i - 1].y);
  }
  return out;
}

// --- finding 3: the diff page with two 1,650-character kernel names ---------------------------

TEST(ReportPages, DiffPageKeepsEveryNumberOnScreenWithLongestRealNames) {
  if (!fs::exists(kNccl)) GTEST_SKIP() << "no " << kNccl;
  if (find_chromium().empty()) GTEST_SKIP() << "Chromium is not installed";
  TempDir out;
  const std::string page = out.file("diff.html");
  const auto [code, text] = shell(std::string(OPSCOPE_CLI) + " analyze diff " + kNccl + " " +
                                  kNccl + " --format html --output " + page);
  ASSERT_EQ(code, 0) << text;
  const std::string html = read_file(page);
  std::string error;
  const std::optional<Image> image = rendered(html, "diff", 1400, 3000, &error);
  ASSERT_TRUE(image) << error;
  const std::vector<Rule> rs = rules(*image);
  ASSERT_GE(rs.size(), 6u) << "the tables' borders are drawn";
  // Every table ends inside the window (the body's margin is 24 px): its right border, and so
  // its last column, the counts and durations, is on screen.
  std::size_t off = 0;
  for (const Rule& r : rs) off += r.right >= image->width - 12 ? 1 : 0;
  EXPECT_EQ(off, 0u) << "of " << rs.size() << " table borders, these run off the page";
  const std::optional<std::uint32_t> left = left_border(*image, rs);
  ASSERT_TRUE(left);
  // A long name is clipped to a few lines (17 px each at 14 px), not 20.
  const std::vector<std::uint32_t> heights = row_heights(*image, rs, *left);
  ASSERT_FALSE(heights.empty());
  EXPECT_LE(*std::max_element(heights.begin(), heights.end()), 64u) << "the tallest row";
  // And the numbers are drawn: ink in the 400 pixels before the last column (the diffs of
  // counts and durations, right-aligned) on the rows of the long names.
  std::size_t long_rows = 0;
  for (std::size_t i = 1; i < rs.size(); ++i) {
    if (rs[i].y - rs[i - 1].y < 30 || rs[i].right < 500) continue;  // a row of one line
    ++long_rows;
    std::size_t inked = 0;
    for (std::uint32_t y = rs[i - 1].y + 1; y < rs[i].y; ++y) {
      for (std::uint32_t x = rs[i].right - 500; x < rs[i].right - 100; ++x) {
        inked += ink(image->at(x, y));
      }
    }
    EXPECT_GT(inked, 100u) << "no numbers beside the name in the row at y " << rs[i].y;
  }
  EXPECT_GE(long_rows, 2u) << "the two cutlass kernels' rows";
  // The page holds the two long names whole, with the full name on hover.
  const std::regex long_name(R"re(title="(_ZN19cutlass[^"]{1500,})")re");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), long_name);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
  }
  EXPECT_GE(names.size(), 2u) << "the diff lists both cutlass kernels with their full names";
}

// --- finding 7: the analyze page ------------------------------------------------------------

TEST(ReportPages, KernelTypeLabelsAreWholeAndSharesAreEachParts) {
  if (find_chromium().empty()) GTEST_SKIP() << "Chromium is not installed";
  const std::vector<Report> reports{
      {"kernel_type",
       {"kernel_type", "sum", "percentage"},
       {{std::string("COMPUTATION overlapping COMMUNICATION"), std::int64_t{600}, 60.0},
        {std::string("COMMUNICATION overlapping MEMORY"), std::int64_t{300}, 30.0},
        {std::string("COMPUTATION"), std::int64_t{100}, 10.0}}},
      {"temporal",
       {"rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
        "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"},
       {{std::int64_t{0}, 500.0, 300.0, 200.0, 1000.0, 50.0, 30.0, 20.0}}}};
  const std::string html = format_reports(reports, ReportFormat::kHtml);
  // The temporal bar says what each part is, not the 100 % they add to.
  EXPECT_NE(html.find("compute 30.00 %, non-compute 20.00 %, idle 50.00 %"), std::string::npos)
      << html;
  EXPECT_EQ(html.find(">100 %<"), std::string::npos);
  std::string error;
  const std::optional<Image> image = rendered(html, "kernel_type", 1400, 700, &error);
  ASSERT_TRUE(image) << error;
  // The kernel-type bars (mediumpurple): the rows they span hold the labels, which must not
  // touch the chart's left edge (the body's margin, 24 px): a label clipped there has ink at
  // its first pixels.
  std::uint32_t top = image->height, bottom = 0, bar_left = image->width;
  for (std::uint32_t y = 0; y < image->height; ++y) {
    for (std::uint32_t x = 0; x < image->width; ++x) {
      if (near(image->at(x, y), {0x93, 0x70, 0xdb}, 3)) {
        top = std::min(top, y);
        bottom = std::max(bottom, y);
        bar_left = std::min(bar_left, x);
      }
    }
  }
  ASSERT_LT(top, bottom) << "the kernel-type bars are drawn";
  std::uint32_t first_ink = image->width;
  for (std::uint32_t y = top; y <= bottom; ++y) {
    for (std::uint32_t x = 0; x < bar_left; ++x) {
      if (ink(image->at(x, y))) first_ink = std::min(first_ink, x);
    }
  }
  EXPECT_GE(first_ink, 28u) << "a label starts at the chart's edge, clipped";
  EXPECT_LT(first_ink, bar_left) << "the labels are drawn";
}

TEST(ReportPages, AnalyzePageNamesItsInputsAndShowsOpsInTorchUnits) {
  if (!fs::exists(kTraceFilter)) GTEST_SKIP() << "no " << kTraceFilter;
  TempDir out;
  const std::string page = out.file("analysis.html");
  const auto [code, text] = shell(std::string(OPSCOPE_CLI) + " analyze " + kTraceFilter +
                                  " --report temporal,ops --format html --output " + page);
  ASSERT_EQ(code, 0) << text;
  const std::string html = read_file(page);
  // What it was made from, by which command, and when.
  EXPECT_NE(html.find("sampled_rank-0.json.gz"), std::string::npos);
  EXPECT_NE(html.find("sampled_rank-1.json.gz"), std::string::npos);
  EXPECT_NE(html.find("opscope analyze " + kTraceFilter + " --report temporal,ops"),
            std::string::npos);
  EXPECT_TRUE(std::regex_search(html, std::regex(R"(<dd>20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ</dd>)")));
  // A table of contents linking each table.
  EXPECT_NE(html.find("<a href=\"#temporal\">"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"#ops\">"), std::string::npos);
  // The ops table as torch prints it: seconds, milliseconds or microseconds with three
  // decimals, the raw microseconds on hover; no bare microseconds such as 2135455.918.
  const std::size_t ops = html.find("<section id=\"ops\">");
  ASSERT_NE(ops, std::string::npos);
  const std::string table = html.substr(ops);
  EXPECT_NE(table.find("<th>Self CPU</th>"), std::string::npos);
  EXPECT_TRUE(std::regex_search(table, std::regex(R"(title="\d+(\.\d+)? us">\d+\.\d{3}ms<)")));
  EXPECT_TRUE(std::regex_search(table, std::regex(R"(title="\d+(\.\d+)? us">\d+\.\d{3}us<)")));
  EXPECT_FALSE(std::regex_search(table, std::regex(R"(<td class="n">\d{4,}\.\d+</td>)")));
}

TEST(ReportPages, KernelsTableOfFullTemplatesKeepsRowsFewLinesHigh) {
  if (!fs::exists(kTraceFilter)) GTEST_SKIP() << "no " << kTraceFilter;
  if (find_chromium().empty()) GTEST_SKIP() << "Chromium is not installed";
  const auto ranks = trace_filter_ranks({"kernels"});
  std::vector<Report> reports;
  for (Report& r : run_report("kernels", ranks)) {
    if (r.name == "kernels") reports.push_back(std::move(r));
  }
  ASSERT_EQ(reports.size(), 1u);
  const std::string html = format_reports(reports, ReportFormat::kHtml);
  std::string error;
  const std::optional<Image> image = rendered(html, "kernels", 1400, 2400, &error);
  ASSERT_TRUE(image) << error;
  const std::vector<Rule> rs = rules(*image);
  ASSERT_GE(rs.size(), 10u);
  std::size_t off = 0;
  for (const Rule& r : rs) off += r.right >= image->width - 12 ? 1 : 0;
  EXPECT_EQ(off, 0u) << "of " << rs.size() << " table borders, these run off the page";
  const std::optional<std::uint32_t> left = left_border(*image, rs);
  ASSERT_TRUE(left);
  const std::vector<std::uint32_t> heights = row_heights(*image, rs, *left);
  ASSERT_GE(heights.size(), 10u);
  EXPECT_LE(*std::max_element(heights.begin(), heights.end()), 64u) << "the tallest row";
}

}  // namespace report_readable_test
}  // namespace opscope
