// format_reports(..., ReportFormat::kHtml): the reports of `opscope analyze` as one
// self-contained page. Where a person would rather look than read, a report comes with a chart
// drawn as inline SVG (no script, no style sheet or font fetched: the page opens offline and
// prints). Which tables get one, and from which columns, the report catalog says as data (each
// report's ReportChart rows, src/analysis/reports/): today the temporal breakdown per rank, idle
// time per stream, GPU time by kernel type and the duration distribution of the top kernels
// across ranks. Every report also comes as a table with every row, so nothing is only in a
// picture.
#include "export/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/report_catalog.h"
#include "export/short_names.h"
#include "opscope/key_averages.h"
#include "opscope/report_output.h"
#include "util/number_text.h"

namespace opscope::internal {
namespace {

std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A chart's value label: whole units from 100 up, else two decimals.
std::string amount(double v) {
  return internal::unsigned_zero(v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}", v));
}

// Characters (UTF-8 sequences) in s.
std::size_t characters(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::optional<std::size_t> column(const Report& r, std::string_view name) {
  for (std::size_t c = 0; c < r.columns.size(); ++c) {
    if (r.columns[c] == name) return c;
  }
  return std::nullopt;
}

double number(const ReportCell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&cell)) return std::isfinite(*d) ? *d : 0.0;
  return 0.0;
}

std::string text(const ReportCell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&cell)) {
    if (!std::isfinite(*d)) return "NaN";
    std::string s = fmt::format("{:.3f}", *d);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return internal::unsigned_zero(std::move(s));
  }
  return std::get<std::string>(cell);
}

// Horizontal bars, one per label, each stacked from `parts` (values in one unit), with a
// legend; the widest bar fills the plot.
void stacked_bars(std::string& html, std::string_view title, std::string_view unit,
                  const std::vector<std::string>& labels,
                  const std::vector<std::vector<double>>& values,
                  std::span<const ChartPart> parts) {
  constexpr int kPlotWidth = 600, kBar = 22, kGap = 8, kTop = 30;
  // Labels that do not fit keep their start, end and what tells them apart. They are set in
  // monospace, whose advance is known (0.6 em: 7.2 px at 12 px), so that the label column is as
  // wide as its longest label and none is clipped on the left ("MPUTATION overlapping
  // COMMUNICATION" was).
  const std::vector<std::string> shown = shortened_names(labels, 60, "…");
  std::size_t longest = 0;
  for (const std::string& l : shown) longest = std::max(longest, characters(l));
  const int label_width = std::max(120, static_cast<int>(std::ceil(7.2 * longest)) + 16);
  // The value after each bar: its total, or, for shares of one whole in percent (the temporal
  // breakdown's compute, non-compute and idle always add to 100 %), each part's share.
  const bool shares = unit == "%" && parts.size() > 1;
  std::vector<std::string> ends;
  std::size_t longest_end = 0;
  double widest = 0;
  for (const auto& row : values) {
    std::string end;
    double sum = 0;
    for (std::size_t p = 0; p < parts.size() && p < row.size(); ++p) {
      const double v = std::max(row[p], 0.0);
      sum += v;
      if (shares) end += fmt::format("{}{} {} {}", p ? ", " : "", parts[p].name, amount(v), unit);
    }
    if (!shares) end = fmt::format("{} {}", amount(sum), unit);
    widest = std::max(widest, sum);
    longest_end = std::max(longest_end, characters(end));
    ends.push_back(std::move(end));
  }
  if (widest <= 0) widest = 1;
  const int legend_y = kTop + static_cast<int>(labels.size()) * (kBar + kGap) + 10;
  const int height = legend_y + 40;
  auto out = std::back_inserter(html);
  fmt::format_to(out,
                 "<svg class=\"chart\" width=\"{}\" height=\"{}\" role=\"img\" "
                 "aria-label=\"{}\">\n<text x=\"0\" y=\"18\" class=\"title\">{}</text>\n",
                 label_width + kPlotWidth + 24 + static_cast<int>(7.5 * longest_end), height,
                 escaped(title), escaped(title));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const int y = kTop + static_cast<int>(i) * (kBar + kGap);
    fmt::format_to(out,
                   "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"label\"><title>{}</title>"
                   "{}</text>\n",
                   label_width - 8, y + kBar - 6, escaped(labels[i]), escaped(shown[i]));
    double x = label_width;
    for (std::size_t p = 0; p < parts.size() && p < values[i].size(); ++p) {
      const double v = std::max(values[i][p], 0.0);
      const double w = v / widest * kPlotWidth;
      if (w > 0) {
        fmt::format_to(out,
                       "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
                       "<title>{}: {} {} {}</title></rect>\n",
                       x, y, w, kBar, parts[p].color, escaped(labels[i]), parts[p].name, amount(v),
                       escaped(unit));
      }
      x += w;
    }
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{}\" class=\"value\">{}</text>\n", x + 6,
                   y + kBar - 6, escaped(ends[i]));
  }
  int lx = label_width;
  for (const ChartPart& p : parts) {
    fmt::format_to(out,
                   "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
                   "<text x=\"{}\" y=\"{}\">{}</text>\n",
                   lx, legend_y, p.color, lx + 20, legend_y + 12, p.name);
    lx += 40 + 8 * static_cast<int>(p.name.size());
  }
  html += "</svg>\n";
}

// The columns a chart reads, by what it reads them for; nullopt when the report lacks one.
struct ChartColumns {
  std::vector<std::pair<std::string_view, std::size_t>> label;  // text, then the cell there
  std::vector<std::size_t> parts;                               // wide tables: each part's
  std::size_t series = 0, value = 0;                            // long tables
  std::size_t group = 0, min = 0, p25 = 0, median = 0, p75 = 0, max = 0;  // boxes
};

std::optional<ChartColumns> chart_columns(const Report& r, const ReportChart& c) {
  ChartColumns at;
  bool all = true;
  const auto find = [&](std::string_view name) {
    const auto i = column(r, name);
    all = all && i.has_value();
    return i.value_or(0);
  };
  for (const ChartLabel& l : c.label) at.label.emplace_back(l.text, find(l.column));
  if (c.kind == ReportChart::Kind::kStackedBars) {
    if (c.series.empty()) {
      for (const ChartPart& p : c.parts) at.parts.push_back(find(p.column));
    } else {
      at.series = find(c.series);
      at.value = find(c.value);
    }
  } else {
    at.group = find(c.group);
    at.min = find(c.min);
    at.p25 = find(c.p25);
    at.median = find(c.median);
    at.p75 = find(c.p75);
    at.max = find(c.max);
  }
  if (!all) return std::nullopt;
  return at;
}

std::string label_of(const ChartColumns& at, const std::vector<ReportCell>& row) {
  std::string label;
  for (const auto& [piece, column] : at.label) label += std::string(piece) + text(row[column]);
  return label;
}

// Stacked bars: a wide table's rows each a bar, its parts from their own columns; a long
// table's runs of rows with one label each a bar, each row adding its value to the part its
// series cell names.
void bars_chart(std::string& html, const Report& r, const ReportChart& c, const ChartColumns& at) {
  std::vector<std::string> labels;
  std::vector<std::vector<double>> values;
  for (const auto& row : r.rows) {
    const std::string label = label_of(at, row);
    if (c.series.empty()) {
      labels.push_back(label);
      values.emplace_back();
      for (const std::size_t p : at.parts) values.back().push_back(number(row[p]));
      continue;
    }
    if (labels.empty() || labels.back() != label) {
      labels.push_back(label);
      values.emplace_back(c.parts.size(), 0.0);
    }
    for (std::size_t p = 0; p < c.parts.size(); ++p) {
      if (text(row[at.series]) == c.parts[p].name) values.back()[p] += number(row[at.value]);
    }
  }
  stacked_bars(html, c.title, c.unit, labels, values, c.parts);
}

// Boxes: for each group, its rows' distributions as a box (25% to 75%) with whiskers (min to
// max) and the median, on one scale per group.
void boxes_chart(std::string& html, const Report& r, const ReportChart& c, const ChartColumns& at) {
  // Groups in their first-row order, each with its rows.
  std::vector<std::string> kernels;
  std::map<std::string, std::vector<const std::vector<ReportCell>*>> rows_of;
  for (const auto& row : r.rows) {
    const std::string k = text(row[at.group]);
    if (!rows_of.contains(k)) kernels.push_back(k);
    rows_of[k].push_back(&row);
  }
  constexpr int kLabelWidth = 260, kPlotWidth = 600, kBox = 14, kGap = 6, kKernelGap = 18;
  int height = 30;
  for (const auto& k : kernels) {
    height += 18 + static_cast<int>(rows_of[k].size()) * (kBox + kGap) + kKernelGap;
  }
  auto out = std::back_inserter(html);
  fmt::format_to(out,
                 "<svg class=\"chart\" width=\"{}\" height=\"{}\" role=\"img\" "
                 "aria-label=\"{}\">\n<text x=\"0\" y=\"18\" "
                 "class=\"title\">{} ({}; box 25% to 75%, line the median, whiskers min to "
                 "max)</text>\n",
                 kLabelWidth + kPlotWidth + 120, height, escaped(c.title), escaped(c.title),
                 escaped(c.unit));
  // A kernel's title keeps its start, end and what tells it from the others (templated kernels
  // differ in the middle); the full name is its tooltip.
  const std::vector<std::string> titles = shortened_names(kernels, 110, "…");
  int y = 30;
  for (std::size_t g = 0; g < kernels.size(); ++g) {
    const std::string& k = kernels[g];
    double top = 0;
    for (const auto* row : rows_of[k]) top = std::max(top, number((*row)[at.max]));
    if (top <= 0) top = 1;
    const auto X = [&](double v) { return kLabelWidth + v / top * kPlotWidth; };
    fmt::format_to(out, "<text x=\"0\" y=\"{}\" class=\"kernel\"><title>{}</title>{}</text>\n",
                   y + 12, escaped(k), escaped(titles[g]));
    y += 18;
    for (const auto* row : rows_of[k]) {
      const auto& cells = *row;
      const std::string label = label_of(at, cells);
      const double mid = y + kBox / 2.0;
      fmt::format_to(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                     kLabelWidth - 8, y + kBox - 2, escaped(label));
      fmt::format_to(out,
                     "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                     "stroke=\"black\"/>\n",
                     X(number(cells[at.min])), mid, X(number(cells[at.max])), mid);
      fmt::format_to(out,
                     "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"teal\" "
                     "stroke=\"black\"><title>{}, {}: min {} / 25% {} / median {} / 75% {} "
                     "/ max {} {}</title></rect>\n",
                     X(number(cells[at.p25])), y,
                     std::max(1.0, X(number(cells[at.p75])) - X(number(cells[at.p25]))), kBox,
                     escaped(k), escaped(label), text(cells[at.min]), text(cells[at.p25]),
                     text(cells[at.median]), text(cells[at.p75]), text(cells[at.max]),
                     escaped(c.unit));
      fmt::format_to(out,
                     "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"white\" "
                     "stroke-width=\"2\"/>\n",
                     X(number(cells[at.median])), y, X(number(cells[at.median])), y + kBox);
      fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{}\">{} {}</text>\n",
                     X(number(cells[at.max])) + 6, y + kBox - 2, text(cells[at.max]),
                     escaped(c.unit));
      y += kBox + kGap;
    }
    y += kKernelGap;
  }
  html += "</svg>\n";
}

// The chart the report catalog gives the table (src/analysis/reports/), if any.
void chart(std::string& html, const Report& r) {
  const ReportChart* c = chart_of(r.name);
  if (c == nullptr || r.rows.empty()) return;
  const std::optional<ChartColumns> at = chart_columns(r, *c);
  if (!at) return;
  if (c->kind == ReportChart::Kind::kStackedBars) {
    bars_chart(html, r, *c, *at);
  } else {
    boxes_chart(html, r, *c, *at);
  }
}

// A header breaks after its underscores (control_total_duration), so that a table of many
// long headers fits its page.
std::string header(std::string_view name) {
  std::string out = escaped(name);
  for (std::size_t at = out.find('_'); at != std::string::npos; at = out.find('_', at + 6)) {
    out.insert(at + 1, "<wbr>");
  }
  return out;
}

// The ops table shows its times and bytes as torch's key_averages().table() prints them
// (2.135s, 815.420ms, 12.000us; 1.50 Mb), its share as 12.34%, with the raw value on hover;
// its header loses the unit the cells now carry. Other tables keep their columns' units.
enum class Unit { kAsIs, kMicroseconds, kBytes, kPercent };

Unit unit_of(const Report& r, std::string_view column) {
  if (r.name != "ops") return Unit::kAsIs;
  if (column.ends_with(" (us)")) return Unit::kMicroseconds;
  if (column.ends_with(" (B)")) return Unit::kBytes;
  if (column.ends_with(" %")) return Unit::kPercent;
  return Unit::kAsIs;
}

std::string header_of(std::string_view column, Unit unit) {
  if (unit == Unit::kMicroseconds) column.remove_suffix(5);
  if (unit == Unit::kBytes) column.remove_suffix(4);
  return header(column);
}

std::string number_cell(const ReportCell& cell, Unit unit) {
  const std::string raw = text(cell);
  if (unit == Unit::kAsIs || std::holds_alternative<std::string>(cell) || raw == "NaN") {
    return fmt::format("<td class=\"n\">{}</td>", escaped(raw));
  }
  std::string shown;
  std::string_view raw_unit;
  if (unit == Unit::kMicroseconds) {
    shown = format_time_us(number(cell));
    raw_unit = " us";
  } else if (unit == Unit::kBytes) {
    shown = format_memory(static_cast<std::int64_t>(std::llround(number(cell))));
    raw_unit = " B";
  } else {
    shown = fmt::format("{:.2f}%", number(cell));
  }
  return fmt::format("<td class=\"n\" title=\"{}{}\">{}</td>", escaped(raw), raw_unit,
                     escaped(shown));
}

// A text longer than this many bytes (a templated kernel's name runs to thousands) is clipped
// to a few lines of its column, whole in the page and on hover.
constexpr std::size_t kLongText = 48;

void table(std::string& html, const Report& r) {
  auto out = std::back_inserter(html);
  std::vector<Unit> units;
  html += "<table>\n<thead><tr>";
  for (const std::string& c : r.columns) {
    units.push_back(unit_of(r, c));
    fmt::format_to(out, "<th>{}</th>", header_of(c, units.back()));
  }
  html += "</tr></thead>\n<tbody>\n";
  for (const auto& row : r.rows) {
    html += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      const ReportCell& cell = row[c];
      if (!std::holds_alternative<std::string>(cell)) {
        html += number_cell(cell, c < units.size() ? units[c] : Unit::kAsIs);
      } else if (const std::string& s = std::get<std::string>(cell); s.size() > kLongText) {
        fmt::format_to(out, "<td class=\"long\"><div class=\"clip\" title=\"{0}\">{0}</div></td>",
                       escaped(s));
      } else {
        fmt::format_to(out, "<td>{}</td>", escaped(s));
      }
    }
    html += "</tr>\n";
  }
  if (r.rows.empty()) {
    fmt::format_to(out, "<tr><td colspan=\"{}\">(no rows)</td></tr>\n",
                   std::max<std::size_t>(1, r.columns.size()));
  }
  html += "</tbody>\n</table>\n";
}

}  // namespace

std::string reports_html(std::span<const Report> reports, const ReportPage& page) {
  std::string html;
  html.reserve(64 * 1024);
  // A long name is clipped within its column (a few lines, broken anywhere: mangled names have
  // no spaces), so that the numbers beside it stay on the page; the cell's title holds it whole.
  html +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>opscope analyze</title>\n<style>\n"
      "body{font:14px sans-serif;margin:24px;color:#222}\n"
      "h2{margin-top:32px}\n"
      "dl.about{display:grid;grid-template-columns:max-content auto;gap:2px 12px}\n"
      "dl.about dd{margin:0;overflow-wrap:anywhere}\n"
      "nav ul{columns:3;padding-left:20px}\n"
      "svg.chart{display:block;margin:12px 0;font:12px sans-serif}\n"
      "svg .title{font-weight:bold;font-size:14px}\n"
      "svg .kernel,svg .label{font-family:monospace}\n"
      "table{border-collapse:collapse;margin:8px 0}\n"
      "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}\n"
      "td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
      "td.long{min-width:24ch}\n"
      "div.clip{max-width:48ch;overflow:hidden;overflow-wrap:anywhere;display:-webkit-box;"
      "-webkit-box-orient:vertical;-webkit-line-clamp:3}\n"
      "</style>\n</head>\n<body>\n<h1>opscope analyze</h1>\n";
  auto out = std::back_inserter(html);
  if (!page.inputs.empty() || !page.command.empty() || !page.made_at.empty()) {
    html += "<dl class=\"about\">\n";
    if (!page.command.empty()) {
      fmt::format_to(out, "<dt>command</dt><dd><code>{}</code></dd>\n", escaped(page.command));
    }
    if (!page.made_at.empty()) {
      fmt::format_to(out, "<dt>made</dt><dd>{}</dd>\n", escaped(page.made_at));
    }
    for (std::size_t i = 0; i < page.inputs.size(); ++i) {
      fmt::format_to(out, "<dt>{}</dt><dd>{}</dd>\n", i == 0 ? "input" : "",
                     escaped(page.inputs[i]));
    }
    html += "</dl>\n";
  }
  // The contents: a link to each table (the page of every report runs to megabytes). Two
  // tables of one name (the same report asked twice) get distinct anchors.
  std::vector<std::string> anchors;
  std::map<std::string, int> seen;
  for (const Report& r : reports) {
    const int n = seen[r.name]++;
    anchors.push_back(n == 0 ? r.name : fmt::format("{}-{}", r.name, n + 1));
  }
  if (reports.size() > 1) {
    html += "<nav>\n<h2>Contents</h2>\n<ul>\n";
    for (std::size_t i = 0; i < reports.size(); ++i) {
      fmt::format_to(out, "<li><a href=\"#{}\">{}</a> ({} rows)</li>\n", escaped(anchors[i]),
                     escaped(reports[i].name), reports[i].rows.size());
    }
    html += "</ul>\n</nav>\n";
  }
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    fmt::format_to(out, "<section id=\"{}\">\n<h2>{}</h2>\n", escaped(anchors[i]), escaped(r.name));
    chart(html, r);
    table(html, r);
    html += "</section>\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace opscope::internal
