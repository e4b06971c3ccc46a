// The memory timeline's .html page as a browser shows it: rendered by headless Chromium,
// screenshotted, and the PNG decoded here to check that the plot is really drawn (each
// category present in the data covers an area in its colour, an absent one does not).
// Skipped when Chromium is not installed.
//
// Set OPSCOPE_TEST_ARTIFACTS to a directory to keep the page and its screenshot there.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "opscope/export.h"
#include "opscope/memory.h"
#include "opscope/result.h"
#include "support/png_screenshot.h"
#include "support/test_support.h"

namespace opscope {
namespace memory_html_render_test {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;

using testing::count_color;
using testing::decode_png;
using testing::find_chromium;
using testing::Image;
using testing::paeth;

TEST(PngDecoder, DecodesEveryFilterType) {
  // A 3x5 RGB image whose rows use filters 0 to 4, encoded by hand.
  const std::uint32_t w = 3, h = 5;
  std::vector<std::uint8_t> want(w * h * 3);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<std::uint8_t>(i * 37 + 11);
  std::vector<std::uint8_t> raw;
  for (std::uint32_t y = 0; y < h; ++y) {
    const int filter = static_cast<int>(y);
    raw.push_back(static_cast<std::uint8_t>(filter));
    for (std::uint32_t i = 0; i < w * 3; ++i) {
      const int x = want[y * w * 3 + i];
      const int a = i >= 3 ? want[y * w * 3 + i - 3] : 0;
      const int b = y > 0 ? want[(y - 1) * w * 3 + i] : 0;
      const int c = y > 0 && i >= 3 ? want[(y - 1) * w * 3 + i - 3] : 0;
      const int predicted = filter == 0   ? 0
                            : filter == 1 ? a
                            : filter == 2 ? b
                            : filter == 3 ? (a + b) / 2
                                          : paeth(a, b, c);
      raw.push_back(static_cast<std::uint8_t>(x - predicted));
    }
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> packed(packed_size);
  ASSERT_EQ(compress(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size())),
            Z_OK);
  std::string png("\x89PNG\r\n\x1a\n", 8);
  auto chunk = [&png](const char* type, const std::vector<std::uint8_t>& body) {
    auto put32 = [&png](std::uint32_t v) {
      for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<char>(v >> s));
    };
    put32(static_cast<std::uint32_t>(body.size()));
    png.append(type, 4);
    png.append(reinterpret_cast<const char*>(body.data()), body.size());
    // (crc32 of a null buffer is its initial value, not a CRC: skip an empty body.)
    uLong crc = crc32(0, reinterpret_cast<const Bytef*>(type), 4);
    if (!body.empty()) crc = crc32(crc, body.data(), static_cast<uInt>(body.size()));
    put32(static_cast<std::uint32_t>(crc));
  };
  chunk("IHDR", {0, 0, 0, w, 0, 0, 0, h, 8, 2, 0, 0, 0});
  // Two IDAT chunks: the decoder must join them.
  const std::size_t half = packed_size / 2;
  chunk("IDAT", std::vector<std::uint8_t>(packed.begin(), packed.begin() + half));
  chunk("IDAT", std::vector<std::uint8_t>(packed.begin() + half, packed.begin() + packed_size));
  chunk("IEND", {});
  std::string error;
  const std::optional<Image> image = decode_png(png, &error);
  ASSERT_TRUE(image) << error;
  EXPECT_EQ(image->width, w);
  EXPECT_EQ(image->height, h);
  EXPECT_EQ(image->rgb, want);
  // A damaged file is refused, not misread.
  std::string damaged = png;
  damaged[40] = static_cast<char>(damaged[40] ^ 0x40);
  EXPECT_FALSE(decode_png(damaged, &error));
}

// --- the page ------------------------------------------------------------------------------

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;
constexpr std::int64_t kMiB = 1 << 20;

// Three training steps of a small model, by hand: parameters, then Adam's state at the first
// step; each step's forward pass builds activations, the backward pass frees them while it
// allocates gradients; a little unnamed scratch memory comes and goes. Nothing is an INPUT, a
// TEMPORARY or an AUTOGRAD_DETAIL.
std::shared_ptr<const ProfilerResult> training_window() {
  ProfilerResult::Builder b;
  const std::int32_t thread = b.add_thread({1, "main"});
  b.set_lenses({.record_shapes = true, .profile_memory = true, .with_stack = true});
  std::uint64_t handle = 0;
  auto report = [&](std::int64_t at_us, std::uint64_t address, std::int64_t bytes,
                    MemoryCategory category) {
    EventDetail d;
    d.memory = {address,
                bytes,
                0,
                0,
                {},
                category,
                bytes < 0 ? MemoryAction::kFree : MemoryAction::kAllocate};
    Event e;
    e.name = "[memory]";
    e.kind = EventKind::kMemory;
    e.thread = thread;
    e.start_ns = e.end_ns = kBase + at_us * 1000;
    e.handle = ++handle;
    e.detail = b.add_detail(std::move(d));
    b.add_event(e);
  };
  using C = MemoryCategory;
  for (int i = 0; i < 4; ++i) report(100 + 200 * i, 0x1000 + i, 8 * kMiB, C::kParameter);
  for (int step = 0; step < 3; ++step) {
    const std::int64_t t0 = 2'000 + step * 10'000;
    for (int i = 0; i < 8; ++i) {
      report(t0 + 400 * i, 0x2000 + i, 6 * kMiB, C::kActivation);
      report(t0 + 400 * i + 100, 0x9000 + i, 2 * kMiB, C::kUnknown);
      report(t0 + 400 * i + 250, 0x9000 + i, -2 * kMiB, C::kUnknown);
    }
    for (int i = 0; i < 4; ++i) report(t0 + 3'600 + 900 * i, 0x3000 + i, 8 * kMiB, C::kGradient);
    for (int i = 7; i >= 0; --i)
      report(t0 + 3'700 + 450 * (7 - i), 0x2000 + i, -6 * kMiB, C::kActivation);
    if (step == 0) {
      for (int i = 0; i < 8; ++i)
        report(t0 + 7'500 + 50 * i, 0x4000 + i, 8 * kMiB, C::kOptimizerState);
    }
    for (int i = 0; i < 4; ++i) report(t0 + 8'500 + 100 * i, 0x3000 + i, -8 * kMiB, C::kGradient);
  }
  b.set_window(kBase, kBase + 33'000'000);
  return b.finish();
}

// Colours as a browser paints the CSS names the page uses for each category.
struct Swatch {
  const char* category;
  std::array<std::uint8_t, 3> rgb;
};
constexpr Swatch kPresent[] = {
    {"PARAMETER", {0x00, 0x64, 0x00}},        // darkgreen
    {"OPTIMIZER_STATE", {0xda, 0xa5, 0x20}},  // goldenrod
    {"ACTIVATION", {0xff, 0x00, 0x00}},       // red
    {"GRADIENT", {0x00, 0x00, 0xcd}},         // mediumblue
    {"UNKNOWN", {0x80, 0x80, 0x80}},          // grey
};
constexpr Swatch kAbsent[] = {
    {"TEMPORARY", {0x93, 0x70, 0xdb}},        // mediumpurple
    {"AUTOGRAD_DETAIL", {0x41, 0x69, 0xe1}},  // royalblue
};

class MemoryHtml : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("memory.html");
    export_memory_timeline(*training_window(), path_, "cpu");
    html_ = read_file(path_);
  }
  void keep(const std::string& file) const {
    const char* artifacts = std::getenv("OPSCOPE_TEST_ARTIFACTS");
    if (artifacts == nullptr || *artifacts == '\0') return;
    std::error_code ec;
    fs::create_directories(artifacts, ec);
    fs::copy_file(file, fs::path(artifacts) / fs::path(file).filename(),
                  fs::copy_options::overwrite_existing, ec);
  }

  TempDir dir_;
  std::string path_;
  std::string html_;
};

TEST_F(MemoryHtml, PageIsSelfContained) {
  // Nothing fetched: no scripts, styles, images or fonts from elsewhere, no URL at all.
  for (const char* needle : {"http:", "https:", "<script", "<link", "<img", "<iframe", "<object",
                             "src=", "href=", "url(", "@import"}) {
    EXPECT_EQ(html_.find(needle), std::string::npos) << needle;
  }
  EXPECT_EQ(html_.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html_.find("<meta charset=\"utf-8\">"), std::string::npos);
}

TEST_F(MemoryHtml, PageHasTitleAxesUnitsLegendAndPeak) {
  EXPECT_NE(html_.find("<title>Memory timeline (cpu)</title>"), std::string::npos);
  EXPECT_NE(html_.find("Time (ms)"), std::string::npos);
  // The peak is 32 MiB of parameters, 64 of optimizer state, 48 of activations and the
  // first 8 MiB of gradients in the second step, 15.6 ms into the window and 15.5 ms after
  // its first report: 152 MiB, so the memory axis is in MiB.
  EXPECT_NE(html_.find("Memory (MiB)"), std::string::npos);
  EXPECT_NE(html_.find("152.00 MiB at 15.500 ms"), std::string::npos);
  EXPECT_NE(html_.find("data-peak-bytes=\"" + std::to_string(152 * kMiB) + "\""),
            std::string::npos);
  for (const char* name : {"PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION",
                           "GRADIENT", "AUTOGRAD_DETAIL", "UNKNOWN"}) {
    EXPECT_NE(html_.find(std::string(">") + name + "<"), std::string::npos) << name;
  }
}

TEST_F(MemoryHtml, ChromiumDrawsEachCategoryPresentAndNoOther) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "Chromium is not installed (Debian: apt install chromium)";
  const std::string png = dir_.file("memory.png");
  const std::string log = dir_.file("chromium.log");
  // A profile and a HOME of its own: Chromium writes both, and must not touch the user's.
  const std::string command =
      "HOME=" + dir_.file("home") + " timeout 120 " + chromium +
      " --headless=new --no-sandbox --disable-gpu --hide-scrollbars --no-first-run"
      " --user-data-dir=" +
      dir_.file("profile") +
      " --window-size=1200,800"
      " --screenshot=" +
      png + " file://" + path_ + " >" + log + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(fs::exists(png)) << "Chromium made no screenshot (status " << status << "):\n"
                               << read_file(log);
  keep(path_);
  keep(png);

  std::string error;
  const std::optional<Image> image = decode_png(read_file(png), &error);
  ASSERT_TRUE(image) << error;
  EXPECT_EQ(image->width, 1200u);
  EXPECT_EQ(image->height, 800u);
  // The plot is left of the legend (the page's SVG puts the legend at x = 874, and the body
  // has a 24 px margin); the legend's swatches must not count as a drawn area.
  constexpr std::uint32_t kLegendX = 890;
  // The smallest band, 2 MiB of scratch 24 times for 150 us in a 33 ms window, is drawn
  // thinnest (some 700 pixels); the others cover tens of thousands.
  std::size_t drawn = 0;
  for (const Swatch& s : kPresent) {
    const std::size_t n = count_color(*image, s.rgb, 3, kLegendX);
    EXPECT_GE(n, 300u) << s.category << " is not drawn";
    drawn += n;
  }
  for (const Swatch& s : kAbsent) {
    EXPECT_LE(count_color(*image, s.rgb, 3, kLegendX), 10u) << s.category << " is drawn";
    // The legend lists every category; an absent one as an outline only (64 pixels).
    EXPECT_LE(count_color(*image, s.rgb), 100u) << s.category << " is filled in the legend";
  }
  // The legend does fill the swatches of the categories present.
  for (const Swatch& s : kPresent) {
    EXPECT_GE(count_color(*image, s.rgb) - count_color(*image, s.rgb, 3, kLegendX), 200u)
        << s.category << " has no swatch in the legend";
  }
  // The plot is big enough to read: a fifth of the screenshot in the categories' colours.
  EXPECT_GE(drawn, static_cast<std::size_t>(image->width) * image->height / 5);
}

// Degenerate windows still give finite geometry: one report (no time span), and memory that
// comes and goes within one microsecond (a peak of zero).
TEST(MemoryHtmlEdges, OneReportOrNothingLeftStillDrawsAFinitePage) {
  for (const std::vector<std::int64_t>& sizes :
       {std::vector<std::int64_t>{4096}, std::vector<std::int64_t>{100, -100}}) {
    ProfilerResult::Builder b;
    const std::int32_t thread = b.add_thread({1, "main"});
    b.set_lenses({.record_shapes = true, .profile_memory = true, .with_stack = true});
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      EventDetail d;
      d.memory = {0x10,
                  sizes[i],
                  0,
                  0,
                  {},
                  MemoryCategory::kTemporary,
                  sizes[i] < 0 ? MemoryAction::kFree : MemoryAction::kAllocate};
      Event e;
      e.name = "[memory]";
      e.kind = EventKind::kMemory;
      e.thread = thread;
      e.start_ns = e.end_ns = kBase + static_cast<std::int64_t>(i);
      e.handle = i + 1;
      e.detail = b.add_detail(std::move(d));
      b.add_event(e);
    }
    TempDir dir;
    export_memory_timeline(*b.finish(), dir.file("m.html"), "cpu");
    const std::string html = read_file(dir.file("m.html"));
    SCOPED_TRACE(sizes.size());
    for (const char* bad : {"nan", "inf", "NaN"})
      EXPECT_EQ(html.find(bad), std::string::npos) << bad;
    if (sizes.size() == 1) {
      EXPECT_NE(html.find("<path fill=\"mediumpurple\""), std::string::npos);
      EXPECT_NE(html.find("Memory (KiB)"), std::string::npos);
    } else {
      // Gone within the microsecond it came: coalesced, nothing is left to draw.
      EXPECT_EQ(html.find("<path"), std::string::npos);
      EXPECT_NE(html.find("Memory (bytes)"), std::string::npos);
      EXPECT_NE(html.find("Peak 0 bytes"), std::string::npos);
    }
  }
}

}  // namespace memory_html_render_test
}  // namespace opscope
