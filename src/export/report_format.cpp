// format_reports(): the text, JSON and CSV forms (HTML: report_html.cpp) of analysis reports
// (opscope/trace_analysis.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "export/report_html.h"
#include "export/short_names.h"
#include "json/json_writer.h"
#include "opscope/export.h"
#include "opscope/report_output.h"
#include "util/number_text.h"

namespace opscope {
namespace {

std::string cell_text(const ReportCell& c) {
  if (const auto* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) {
    if (!std::isfinite(*d)) return "NaN";
    char buf[64];
    // Up to 3 decimals (ns resolution of microseconds), without trailing zeros.
    std::snprintf(buf, sizeof buf, "%.3f", *d);
    std::string s = buf;
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return internal::unsigned_zero(std::move(s));
  }
  return std::get<std::string>(c);
}

// A text table's cells: a text longer than kMaxTextCell bytes (a templated kernel's name runs
// to thousands) keeps its start and end around "...", and where two names of a column would
// then look alike, the word where they differ (export/short_names.h), so that the table stays
// readable and its rows distinct; JSON and CSV keep every text whole.
constexpr std::size_t kMaxTextCell = 100;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string format_reports(std::span<const Report> reports, ReportFormat format,
                           const ReportPage& page) {
  std::string out;
  switch (format) {
    case ReportFormat::kHtml:
      return internal::reports_html(reports, page);
    case ReportFormat::kJson: {
      internal::JsonWriter w(4096);
      w.begin_object();
      for (const Report& r : reports) {
        w.key(r.name);
        w.begin_array();
        for (const auto& row : r.rows) {
          w.begin_object();
          for (std::size_t c = 0; c < r.columns.size() && c < row.size(); ++c) {
            w.key(r.columns[c]);
            if (const auto* i = std::get_if<std::int64_t>(&row[c])) {
              w.integer(*i);
            } else if (const auto* d = std::get_if<double>(&row[c])) {
              // -0.0 (0 - 0.0, a sum of nothing negated) is 0; a JSON reader keeps the sign.
              w.number(*d == 0 ? 0.0 : *d);
            } else {
              w.string(std::get<std::string>(row[c]));
            }
          }
          w.end_object();
        }
        w.end_array();
      }
      w.end_object();
      out = std::string(w.view());
      out += "\n";
      return out;
    }
    case ReportFormat::kCsv:
      for (const Report& r : reports) {
        if (reports.size() > 1) out += "# " + r.name + "\n";
        for (std::size_t c = 0; c < r.columns.size(); ++c) {
          out += (c ? "," : "") + csv_field(r.columns[c]);
        }
        out += "\n";
        for (const auto& row : r.rows) {
          for (std::size_t c = 0; c < row.size(); ++c)
            out += (c ? "," : "") + csv_field(cell_text(row[c]));
          out += "\n";
        }
      }
      return out;
    case ReportFormat::kText:
      for (std::size_t k = 0; k < reports.size(); ++k) {
        const Report& r = reports[k];
        if (k) out += "\n";
        out += r.name + "\n";
        std::vector<std::size_t> width(r.columns.size());
        std::vector<std::vector<std::string>> cells;
        for (std::size_t c = 0; c < r.columns.size(); ++c) width[c] = r.columns[c].size();
        for (const auto& row : r.rows) {
          cells.emplace_back();
          for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
            cells.back().push_back(cell_text(row[c]));
          }
        }
        for (std::size_t c = 0; c < width.size(); ++c) {
          std::vector<std::string> texts;
          for (std::size_t i = 0; i < cells.size(); ++i) {
            if (c < cells[i].size() && std::holds_alternative<std::string>(r.rows[i][c])) {
              texts.push_back(cells[i][c]);
            }
          }
          const std::vector<std::string> shown =
              internal::shortened_names(texts, kMaxTextCell, "...");
          for (std::size_t i = 0, k = 0; i < cells.size(); ++i) {
            if (c >= cells[i].size()) continue;
            if (std::holds_alternative<std::string>(r.rows[i][c])) cells[i][c] = shown[k++];
            width[c] = std::max(width[c], cells[i][c].size());
          }
        }
        const auto line = [&](const std::vector<std::string>& v, bool header) {
          std::string l;
          for (std::size_t c = 0; c < v.size(); ++c) {
            const bool left =
                header || (!r.rows.empty() && std::holds_alternative<std::string>(r.rows[0][c]));
            std::string cell = v[c];
            const std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
            l += (c ? "  " : "") + (left ? cell + pad : pad + cell);
          }
          while (!l.empty() && l.back() == ' ') l.pop_back();
          return l + "\n";
        };
        out += line(r.columns, true);
        std::string rule;
        for (std::size_t c = 0; c < width.size(); ++c)
          rule += (c ? "  " : "") + std::string(width[c], '-');
        out += rule + "\n";
        for (const auto& row : cells) out += line(row, false);
        if (r.rows.empty()) out += "(no rows)\n";
      }
      return out;
  }
  return out;
}

}  // namespace opscope
