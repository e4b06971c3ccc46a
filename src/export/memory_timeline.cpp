// The memory timeline exporter (memory_timeline.h).
//
// The JSON forms copy PyTorch's json.dump output exactly (", " between items), so a script
// written for PyTorch's files reads ours unchanged. The HTML form draws its plot as inline
// SVG computed here rather than with a charting script: the page then needs no network, no
// JavaScript and no particular browser, and what it shows is fixed when it is written.
#include "export/memory_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "json/json_writer.h"
#include "opscope/error.h"

namespace opscope::internal {
namespace {

using analysis::CategorySizes;
using analysis::CoalescedTimeline;
using analysis::TimelineAction;
using analysis::TimelineEntry;

// Output reaches the sink in blocks of about this size.
constexpr std::size_t kTimelineFlushBytes = 256 << 10;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void flush_if_full(JsonWriter& w, Sink& sink) {
  if (w.size() >= kTimelineFlushBytes) {
    sink.write(w.view());
    w.clear();
  }
}

// One integer and the separator json.dump puts before it.
void put_item(JsonWriter& w, bool first, std::int64_t v) {
  char* p = w.reserve(24);
  if (!first) p = put(p, ", ");
  w.commit(put_int(p, v));
}

// [[t0, t1, ...], [[0, a, ...], ...]]
void write_coalesced(const CoalescedTimeline& c, Sink& sink) {
  JsonWriter w(kTimelineFlushBytes + 4096);
  w.append("[[");
  for (std::size_t i = 0; i < c.times_us.size(); ++i) {
    put_item(w, i == 0, c.times_us[i]);
    flush_if_full(w, sink);
  }
  w.append("], [");
  for (std::size_t i = 0; i < c.sizes.size(); ++i) {
    if (i != 0) w.append(", ");
    w.append("[");
    for (std::size_t k = 0; k < c.sizes[i].size(); ++k) put_item(w, k == 0, c.sizes[i][k]);
    w.append("]");
    flush_if_full(w, sink);
  }
  w.append("]]");
  sink.write(w.view());
}

// [[t, action, numbytes, category], ...]; INCREMENT_VERSION is two rows (old version out,
// new version in), DESTROY has negative bytes, as export_memory_timeline_raw writes them.
void write_raw(std::span<const TimelineEntry> timeline, Sink& sink) {
  JsonWriter w(kTimelineFlushBytes + 4096);
  w.append("[");
  bool first = true;
  auto row = [&](const TimelineEntry& e, std::int64_t bytes) {
    w.append(first ? "[" : ", [");
    first = false;
    put_item(w, true, e.t_ns);
    put_item(w, false, static_cast<std::int64_t>(e.action));
    put_item(w, false, bytes);
    put_item(w, false, static_cast<std::int64_t>(e.category));
    w.append("]");
  };
  for (const TimelineEntry& e : timeline) {
    switch (e.action) {
      case TimelineAction::kPreexisting:
      case TimelineAction::kCreate:
        row(e, e.bytes);
        break;
      case TimelineAction::kIncrementVersion:
        row(e, -e.bytes);
        row(e, e.bytes);
        break;
      case TimelineAction::kDestroy:
        row(e, -e.bytes);
        break;
    }
    flush_if_full(w, sink);
  }
  w.append("]");
  sink.write(w.view());
}

// --- the HTML page ------------------------------------------------------------------------

// PyTorch's _CATEGORY_TO_COLORS, in stacking order (bottom first), as CSS colour names; the
// hex values are what a browser paints for them.
struct CategoryStyle {
  MemoryCategory category;
  std::string_view color;
};
constexpr std::array<CategoryStyle, kNumMemoryCategories> kStyles = {{
    {MemoryCategory::kParameter, "darkgreen"},       // #006400
    {MemoryCategory::kOptimizerState, "goldenrod"},  // #daa520
    {MemoryCategory::kInput, "black"},               // #000000
    {MemoryCategory::kTemporary, "mediumpurple"},    // #9370db
    {MemoryCategory::kActivation, "red"},            // #ff0000
    {MemoryCategory::kGradient, "mediumblue"},       // #0000cd
    {MemoryCategory::kAutogradDetail, "royalblue"},  // #4169e1
    {MemoryCategory::kUnknown, "grey"},              // #808080
}};

// Plot geometry in SVG units (the page shows the SVG at this size).
constexpr double kSvgWidth = 1100, kSvgHeight = 600;
constexpr double kPlotLeft = 90, kPlotTop = 20, kPlotWidth = 760, kPlotHeight = 500;
constexpr double kLegendLeft = kPlotLeft + kPlotWidth + 24;
// More timestamps than this many per plot column are thinned (see thin_samples).
constexpr std::size_t kSamplesPerColumn = 2;

struct ByteUnit {
  double bytes;
  std::string_view name;
};

// The largest binary unit the peak reaches, so the axis reads "1.5" rather than "1572864".
ByteUnit unit_for(std::int64_t peak) {
  if (peak >= (std::int64_t{1} << 30)) return {1024.0 * 1024 * 1024, "GiB"};
  if (peak >= (std::int64_t{1} << 20)) return {1024.0 * 1024, "MiB"};
  if (peak >= (std::int64_t{1} << 10)) return {1024.0, "KiB"};
  return {1.0, "bytes"};
}

std::string format_bytes(std::int64_t bytes) {
  const ByteUnit u = unit_for(bytes);
  if (u.bytes == 1.0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.2f} {}", static_cast<double>(bytes) / u.bytes, u.name);
}

// A 1-2-5 step that cuts `range` into about `target` intervals.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  return nice * magnitude;
}

// Decimals that show every tick of `step` distinctly ("0.25" for 0.05 steps: 2).
int decimals_for(double step) {
  int d = 0;
  while (d < 6 && std::fabs(step * std::pow(10.0, d) - std::round(step * std::pow(10.0, d))) >
                      1e-9 * std::pow(10.0, d)) {
    ++d;
  }
  return d;
}

std::int64_t total_of(const CategorySizes& s) {
  std::int64_t t = 0;
  for (std::size_t i = 1; i < s.size(); ++i) t += std::max<std::int64_t>(s[i], 0);
  return t;
}

// The samples to draw. A window can hold millions of timestamps and a plot column can show
// one: past kSamplesPerColumn per column, each column keeps its sample of largest total (so
// no peak disappears), plus the first and the last sample.
std::vector<std::size_t> thin_samples(const CoalescedTimeline& c, std::int64_t t0, double span_us) {
  const std::size_t n = c.times_us.size();
  std::vector<std::size_t> keep;
  const auto columns = static_cast<std::size_t>(kPlotWidth);
  if (n <= columns * kSamplesPerColumn) {
    keep.resize(n);
    for (std::size_t i = 0; i < n; ++i) keep[i] = i;
    return keep;
  }
  keep.push_back(0);
  std::size_t best = 0;
  std::int64_t best_total = -1;
  std::size_t column = 0;
  for (std::size_t i = 1; i + 1 < n; ++i) {
    const auto col = static_cast<std::size_t>(static_cast<double>(c.times_us[i] - t0) / span_us *
                                              static_cast<double>(columns));
    if (col != column && best_total >= 0) {
      keep.push_back(best);
      best_total = -1;
    }
    column = col;
    const std::int64_t total = total_of(c.sizes[i]);
    if (total > best_total) {
      best = i;
      best_total = total;
    }
  }
  if (best_total >= 0) keep.push_back(best);
  keep.push_back(n - 1);
  return keep;
}

}  // namespace

std::string memory_timeline_html(const CoalescedTimeline& c, Device device, std::int64_t end_us) {
  const std::string dev = device_name(device);
  std::string html;
  html.reserve(64 * 1024);
  fmt::format_to(std::back_inserter(html),
                 "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<title>Memory timeline ({0})</title>\n<style>\n"
                 "body {{ font-family: sans-serif; margin: 16px 24px; color: #222; "
                 "background: #fff; }}\n"
                 "h1 {{ font-size: 20px; margin: 0 0 4px 0; }}\n"
                 "p.summary {{ margin: 0 0 12px 0; font-size: 14px; color: #444; }}\n"
                 "svg text {{ font-family: sans-serif; }}\n"
                 "</style>\n</head>\n<body>\n<h1>Memory timeline: {0}</h1>\n",
                 dev);

  if (c.times_us.empty()) {
    fmt::format_to(std::back_inserter(html),
                   "<p class=\"summary\">No memory was reported on device {} in this window. "
                   "Record with profile_memory: Python allocations are recorded by "
                   "opscope.profiler itself; C++ code reports its own "
                   "(opscope::report_memory_usage, or the opscope::memhook library for "
                   "malloc and new).</p>\n"
                   "</body>\n</html>\n",
                   dev);
    return html;
  }

  const std::size_t n = c.times_us.size();
  const std::int64_t t0 = c.times_us.front();
  const std::int64_t t_end = std::max(c.times_us.back(), end_us);
  // At least one microsecond, so a single sample still gets a visible width.
  const double span_us = static_cast<double>(std::max<std::int64_t>(t_end - t0, 1));

  std::int64_t peak = 0;
  std::size_t peak_at = 0;
  std::array<std::int64_t, kNumMemoryCategories> category_max{};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t total = total_of(c.sizes[i]);
    if (total > peak) {
      peak = total;
      peak_at = i;
    }
    for (int k = 0; k < kNumMemoryCategories; ++k) {
      category_max[k] = std::max(category_max[k], c.sizes[i][k + 1]);
    }
  }

  // Axes: memory in the unit of the peak, time in ms from the first sample.
  const ByteUnit unit = unit_for(peak);
  const double peak_units = static_cast<double>(peak) / unit.bytes;
  const double y_step = nice_step(peak_units > 0 ? peak_units : 1, 5);
  const double y_max = std::max(std::ceil(peak_units / y_step - 1e-9) * y_step, y_step);
  const double span_ms = span_us / 1000.0;
  const double x_step = nice_step(span_ms, 8);
  const double x_max = span_ms;
  auto X = [&](std::int64_t t_us) {
    return kPlotLeft + static_cast<double>(t_us - t0) / span_us * kPlotWidth;
  };
  auto Y = [&](double bytes) {
    return kPlotTop + kPlotHeight - bytes / unit.bytes / y_max * kPlotHeight;
  };

  fmt::format_to(std::back_inserter(html),
                 "<p class=\"summary\">Peak {} at {:.3f} ms &middot; {} timestamps over "
                 "{:.3f} ms &middot; memory freed in the window but allocated before it is "
                 "shown from the first sample &middot; 1 KiB = 1024 bytes</p>\n",
                 format_bytes(peak), static_cast<double>(c.times_us[peak_at] - t0) / 1000.0, n,
                 span_ms);
  fmt::format_to(std::back_inserter(html),
                 "<svg width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"Memory by category over "
                 "time on {2}\" font-size=\"13\" data-peak-bytes=\"{3}\">\n"
                 "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
                 kSvgWidth, kSvgHeight, dev, peak);

  // Grid and tick labels.
  const int y_decimals = decimals_for(y_step);
  for (int i = 0;; ++i) {
    const double v = i * y_step;
    if (v > y_max + y_step * 1e-6) break;
    const double y = kPlotTop + kPlotHeight - v / y_max * kPlotHeight;
    fmt::format_to(std::back_inserter(html),
                   "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.{6}f}</text>\n",
                   kPlotLeft, y, kPlotLeft + kPlotWidth, kPlotLeft - 8, y + 4, v, y_decimals);
  }
  const int x_decimals = decimals_for(x_step);
  for (int i = 0;; ++i) {
    const double v = i * x_step;
    if (v > x_max + x_step * 1e-6) break;
    const double x = kPlotLeft + v / span_ms * kPlotWidth;
    fmt::format_to(std::back_inserter(html),
                   "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:.{5}f}</text>\n",
                   x, kPlotTop, kPlotTop + kPlotHeight, kPlotTop + kPlotHeight + 18, v, x_decimals);
  }

  // The stacked areas: each category between the sum of those below it and that plus its
  // own, as steps (memory stays as it is until the next report).
  const std::vector<std::size_t> samples = thin_samples(c, t0, span_us);
  std::vector<double> lower(samples.size(), 0.0);
  std::vector<double> upper(samples.size(), 0.0);
  for (const CategoryStyle& style : kStyles) {
    const auto k = static_cast<std::size_t>(style.category);
    if (category_max[k] <= 0) continue;
    for (std::size_t j = 0; j < samples.size(); ++j) {
      upper[j] =
          lower[j] + static_cast<double>(std::max<std::int64_t>(c.sizes[samples[j]][k + 1], 0));
    }
    fmt::format_to(std::back_inserter(html), "<path fill=\"{}\" d=\"M", style.color);
    for (std::size_t j = 0; j < samples.size(); ++j) {
      const double x1 = X(c.times_us[samples[j]]);
      const double x2 = j + 1 < samples.size() ? X(c.times_us[samples[j + 1]]) : X(t_end);
      fmt::format_to(std::back_inserter(html), "{}{:.1f},{:.1f} {:.1f},{:.1f}", j == 0 ? "" : " ",
                     x1, Y(upper[j]), x2, Y(upper[j]));
    }
    for (std::size_t j = samples.size(); j-- > 0;) {
      const double x1 = X(c.times_us[samples[j]]);
      const double x2 = j + 1 < samples.size() ? X(c.times_us[samples[j + 1]]) : X(t_end);
      fmt::format_to(std::back_inserter(html), " {:.1f},{:.1f} {:.1f},{:.1f}", x2, Y(lower[j]), x1,
                     Y(lower[j]));
    }
    fmt::format_to(std::back_inserter(html), "Z\"><title>{} (max {})</title></path>\n",
                   memory_category_name(style.category), format_bytes(category_max[k]));
    lower.swap(upper);
  }

  // The peak: a dashed line across the plot and where it was reached.
  const double peak_y = Y(static_cast<double>(peak));
  const double peak_x = X(c.times_us[peak_at]);
  fmt::format_to(std::back_inserter(html),
                 "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#c00000\" "
                 "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>"
                 "<circle cx=\"{3:.1f}\" cy=\"{1:.1f}\" r=\"4\" fill=\"none\" stroke=\"#c00000\" "
                 "stroke-width=\"1.5\"/>"
                 "<text x=\"{4}\" y=\"{5:.1f}\" text-anchor=\"end\" fill=\"#c00000\">peak {6} "
                 "at {7:.3f} ms</text>\n",
                 kPlotLeft, peak_y, kPlotLeft + kPlotWidth, peak_x, kPlotLeft + kPlotWidth - 4,
                 std::max(peak_y - 6, kPlotTop + 12), format_bytes(peak),
                 static_cast<double>(c.times_us[peak_at] - t0) / 1000.0);

  // Axes and their titles.
  fmt::format_to(std::back_inserter(html),
                 "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" "
                 "stroke=\"#333\"/>\n"
                 "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\" font-size=\"14\">Time (ms) "
                 "since the first sample</text>\n"
                 "<text transform=\"translate(24 {6}) rotate(-90)\" text-anchor=\"middle\" "
                 "font-size=\"14\">Memory ({7})</text>\n",
                 kPlotLeft, kPlotTop, kPlotWidth, kPlotHeight, kPlotLeft + kPlotWidth / 2,
                 kPlotTop + kPlotHeight + 44, kPlotTop + kPlotHeight / 2, unit.name);

  // Legend, top category first as in the stack.
  fmt::format_to(std::back_inserter(html),
                 "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">Category "
                 "(max)</text>\n",
                 kLegendLeft, kPlotTop + 12);
  double ly = kPlotTop + 30;
  for (auto it = kStyles.rbegin(); it != kStyles.rend(); ++it) {
    const auto k = static_cast<std::size_t>(it->category);
    const bool used = category_max[k] > 0;
    fmt::format_to(std::back_inserter(html),
                   "<rect x=\"{0}\" y=\"{1}\" width=\"16\" height=\"16\" {2}=\"{3}\"{4}/>"
                   "<text x=\"{5}\" y=\"{6}\"{7}>{8}</text>"
                   "<text x=\"{5}\" y=\"{9}\" font-size=\"11\" fill=\"#666\">{10}</text>\n",
                   // A category the window never used keeps its colour as an outline only,
                   // so the eye finds in the plot only the colours the legend fills.
                   used ? kLegendLeft : kLegendLeft + 0.5, used ? ly : ly + 0.5,
                   used ? "fill" : "stroke", it->color, used ? "" : " fill=\"none\"",
                   kLegendLeft + 24, ly + 12, used ? "" : " fill=\"#888\"",
                   memory_category_name(it->category), ly + 26,
                   used ? format_bytes(category_max[k]) : std::string("none"));
    ly += 40;
  }
  html += "</svg>\n</body>\n</html>\n";
  return html;
}

MemoryTimelineFormat memory_timeline_format(const std::string& path) {
  if (ends_with(path, ".raw.json.gz")) return MemoryTimelineFormat::kRawJsonGz;
  if (ends_with(path, ".json.gz")) return MemoryTimelineFormat::kJsonGz;
  if (ends_with(path, ".json")) return MemoryTimelineFormat::kJson;
  if (ends_with(path, ".html")) return MemoryTimelineFormat::kHtml;
  throw Error("export_memory_timeline: cannot tell the format of '" + path +
              "'; the path must end in .html, .json, .json.gz or .raw.json.gz");
}

void check_memory_timeline_lenses(const ProfilerResult& result) {
  const LensSet& l = result.lenses();
  std::string missing;
  auto need = [&](bool on, std::string_view name) {
    if (on) return;
    if (!missing.empty()) missing += ", ";
    missing += name;
  };
  need(l.record_shapes, "record_shapes");
  need(l.profile_memory, "profile_memory");
  need(l.with_stack, "with_stack");
  if (!missing.empty()) {
    throw Error(
        "export_memory_timeline needs record_shapes, profile_memory and with_stack; this "
        "profile was recorded without: " +
        missing);
  }
}

Device parse_timeline_device(std::string_view device) {
  const std::optional<Device> d = parse_device(device);
  if (!d) {
    throw Error("export_memory_timeline: unknown device '" + std::string(device) +
                "'; expected 'cpu', 'cuda' or 'cuda:N' (N from 0 to 127)");
  }
  return *d;
}

void write_memory_timeline(const ProfilerResult& result, Device device, MemoryTimelineFormat format,
                           Sink& sink) {
  const std::vector<TimelineEntry> timeline = analysis::memory_timeline(result, device);
  switch (format) {
    case MemoryTimelineFormat::kRawJsonGz:
      write_raw(timeline, sink);
      break;
    case MemoryTimelineFormat::kJson:
    case MemoryTimelineFormat::kJsonGz:
      write_coalesced(analysis::coalesce_timeline(timeline), sink);
      break;
    case MemoryTimelineFormat::kHtml: {
      const CoalescedTimeline c = analysis::coalesce_timeline(timeline);
      std::int64_t end_us = result.end_time_ns() / 1000;
      if (end_us <= 0 && !c.times_us.empty()) end_us = c.times_us.back();
      sink.write(memory_timeline_html(c, device, end_us));
      break;
    }
  }
  sink.commit();
}

void export_memory_timeline(const ProfilerResult& result, const std::string& path,
                            std::string_view device) {
  check_memory_timeline_lenses(result);
  const Device d = parse_timeline_device(device);
  const MemoryTimelineFormat format = memory_timeline_format(path);
  std::unique_ptr<Sink> sink = open_file_sink(path, {.what = "memory timeline"});
  write_memory_timeline(result, d, format, *sink);
}

}  // namespace opscope::internal
