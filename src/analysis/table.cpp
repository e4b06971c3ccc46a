// KeyAverages::table(): PyTorch 1.13's _build_table (torch/autograd/profiler_util.py), byte for
// byte, so that tools and people reading PyTorch's tables read ours the same way. The goldens
// in tests/unit/table_test.cpp compare against PyTorch's own output.
//
// Two deliberate differences: "Source Location" and FLOPs values stay under their own headers
// (PyTorch swaps them when both are shown), and top_level_events_only uses
// FunctionEventAvg::top_level (PyTorch looks at the first member's CPU parent).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/table_sort_keys.h"
#include "opscope/error.h"
#include "opscope/key_averages.h"

namespace opscope {
namespace {

constexpr int kSpacing = 2;
constexpr int kDefaultWidth = 12;
constexpr std::size_t kMaxStackEntries = 5;  // the source row shows entry 0, then 1..4

// Python's len() and slicing count code points, and PyTorch pads and cuts with them; counting
// bytes would misalign every row that holds a non-ASCII name.
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::size_t text_length(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return !is_continuation(c); }));
}

// s[:n] in code points.
std::string_view text_prefix(std::string_view s, std::size_t n) {
  std::size_t i = 0;
  for (std::size_t seen = 0; i < s.size(); ++i) {
    if (!is_continuation(s[i]) && seen++ == n) break;
  }
  return s.substr(0, i);
}

// s[len(s) - n:] in code points.
std::string_view text_suffix(std::string_view s, std::size_t n) {
  std::size_t length = text_length(s);
  if (n >= length) return s;
  return s.substr(text_prefix(s, length - n).size());
}

// PyTorch's trim_path: keeps the end of a long source location and marks the cut with "...".
std::string trim_path(std::string_view path, std::size_t width) {
  if (text_length(path) <= width) return std::string(path);
  std::string_view kept = text_suffix(path, width);
  if (text_length(kept) <= 3) return std::string(kept);
  return "..." + std::string(text_suffix(kept, text_length(kept) - 3));
}

double ns_to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// _format_time_share: the share of the summed self CPU time.
std::string format_share(double time_us, double total_us) {
  if (total_us == 0) return "NaN";
  return fmt::format("{:.2f}%", time_us * 100.0 / total_us);
}

// The sort keys PyTorch accepts on FunctionEventAvg, in the order the error message lists them.
struct SortKey {
  std::string_view name;
  double (*value)(const FunctionEventAvg&);
};

constexpr SortKey kSortKeys[] = {
    {"cpu_time", [](const FunctionEventAvg& r) { return r.cpu_time_avg_ns(); }},
    {"cpu_time_total",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.cpu_time_total_ns); }},
    {"self_cpu_time_total",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.self_cpu_time_total_ns); }},
    {"count", [](const FunctionEventAvg& r) { return static_cast<double>(r.count); }},
    {"cpu_memory_usage",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.cpu_memory_usage); }},
    {"self_cpu_memory_usage",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.self_cpu_memory_usage); }},
    {"flops", [](const FunctionEventAvg& r) { return static_cast<double>(r.flops); }},
    {"cuda_time", [](const FunctionEventAvg& r) { return r.cuda_time_avg_ns(); }},
    {"cuda_time_total",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.cuda_time_total_ns); }},
    {"self_cuda_time_total",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.self_cuda_time_total_ns); }},
    {"cuda_memory_usage",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.cuda_memory_usage); }},
    {"self_cuda_memory_usage",
     [](const FunctionEventAvg& r) { return static_cast<double>(r.self_cuda_memory_usage); }},
};

const SortKey& find_sort_key(const std::string& name) {
  std::string valid;
  for (const SortKey& key : kSortKeys) {
    if (key.name == name) return key;
    valid += valid.empty() ? "" : ", ";
    valid += key.name;
  }
  throw Error(fmt::format("table(): unknown sort_by \"{}\"; valid keys are: {}", name, valid));
}

// The rows in the order table() shows them: by `sort_key` descending, or first-seen without.
std::vector<const FunctionEventAvg*> in_order(const std::vector<FunctionEventAvg>& all,
                                              const SortKey* sort_key) {
  std::vector<const FunctionEventAvg*> rows;
  rows.reserve(all.size());
  for (const FunctionEventAvg& r : all) rows.push_back(&r);
  if (sort_key != nullptr) {
    // Python's sorted(reverse=True) is stable: equal keys keep first-seen order.
    std::stable_sort(rows.begin(), rows.end(), [&](const auto* a, const auto* b) {
      return sort_key->value(*a) > sort_key->value(*b);
    });
  }
  return rows;
}

void check_width(const char* option, int width) {
  if (width <= 0) {
    throw Error(fmt::format("table(): {} must be positive, got {}", option, width));
  }
}

// The row layout: one cell per column, each padded to its width (longer text overflows, as in
// Python's format) and followed by kSpacing spaces.
class Layout {
 public:
  void add_column(std::string header, std::size_t width, bool left_aligned = false) {
    columns_.push_back({std::move(header), width, left_aligned});
  }
  std::size_t size() const { return columns_.size(); }
  std::size_t line_length() const {
    std::size_t n = 0;
    for (const Column& c : columns_) n += c.width + kSpacing;
    return n - kSpacing;
  }

  void append_separator(std::string& out) const {
    for (const Column& c : columns_) out.append(c.width, '-').append(kSpacing, ' ');
    out += '\n';
  }
  void append_headers(std::string& out) const {
    std::vector<std::string> cells;
    for (const Column& c : columns_) cells.push_back(c.header);
    append_row(out, cells);
  }
  void append_row(std::string& out, const std::vector<std::string>& cells) const {
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      const Column& c = columns_[i];
      std::size_t length = text_length(cells[i]);
      std::size_t pad = length < c.width ? c.width - length : 0;
      if (!c.left_aligned) out.append(pad, ' ');
      out += cells[i];
      if (c.left_aligned) out.append(pad, ' ');
      out.append(kSpacing, ' ');
    }
    out += '\n';
  }

 private:
  struct Column {
    std::string header;
    std::size_t width;
    bool left_aligned;
  };
  std::vector<Column> columns_;
};

// A shapes string counts as recorded unless it is empty or PyTorch's empty list.
bool has_shapes(const FunctionEventAvg& r) {
  return !r.input_shapes.empty() && r.input_shapes != "[]";
}

}  // namespace

std::string format_time_us(double time_us) {
  if (time_us >= 1000.0 * 1000.0) return fmt::format("{:.3f}s", time_us / (1000.0 * 1000.0));
  if (time_us >= 1000.0) return fmt::format("{:.3f}ms", time_us / 1000.0);
  return fmt::format("{:.3f}us", time_us);
}

std::string format_memory(std::int64_t bytes) {
  constexpr std::int64_t kKb = 1024, kMb = 1024 * kKb, kGb = 1024 * kMb;
  const std::int64_t magnitude = bytes < 0 ? -bytes : bytes;
  const double b = static_cast<double>(bytes);
  if (magnitude >= kGb) return fmt::format("{:.2f} Gb", b / kGb);
  if (magnitude >= kMb) return fmt::format("{:.2f} Mb", b / kMb);
  if (magnitude >= kKb) return fmt::format("{:.2f} Kb", b / kKb);
  return fmt::format("{} b", bytes);
}

namespace {

// The table's time format for TableOptions::time_unit: fixed, or each value its own.
using TimeFormat = std::string (*)(double time_us);

TimeFormat time_format(const std::string& unit) {
  if (unit.empty()) return format_time_us;
  if (unit == "s") return [](double us) { return fmt::format("{:.3f}s", us / 1e6); };
  if (unit == "ms") return [](double us) { return fmt::format("{:.3f}ms", us / 1e3); };
  if (unit == "us") return [](double us) { return fmt::format("{:.3f}us", us); };
  throw Error(
      fmt::format("table(): unknown time_unit \"{}\"; use \"s\", \"ms\" or \"us\" (or "
                  "none, for each time its own unit)",
                  unit));
}

}  // namespace

std::string KeyAverages::table(const TableOptions& options) const {
  const TimeFormat format_time = time_format(options.time_unit);
  check_width("max_name_column_width", options.max_name_column_width);
  check_width("max_src_column_width", options.max_src_column_width);
  check_width("max_shapes_column_width", options.max_shapes_column_width);
  const SortKey* sort_key = options.sort_by.empty() ? nullptr : &find_sort_key(options.sort_by);
  if (rows_.empty()) return "";

  const std::vector<const FunctionEventAvg*> rows = in_order(rows_, sort_key);

  // Column widths come from every row, not only the ones shown, as in PyTorch.
  std::size_t name_width = 0, shapes_width = 0, src_width = 0;
  bool any_shapes = false, any_stack = false, any_node_id = false;
  std::int64_t min_flops = 0;
  double sum_self_us = 0;
  // torch: CUDA columns when any row has self CUDA time; the CUDA shares are of the GPU work's
  // own rows (an operator's CUDA time is theirs again), or, with no such rows (ranges timed
  // with CUDA events, torch's legacy events), of the operators' own.
  bool has_cuda_time = false;
  double sum_self_cuda_us = 0;
  double sum_operators_self_cuda_us = 0;
  bool any_device_row = false;
  bool has_cuda_memory = false;  // torch: "CUDA Mem" columns when some row allocated on CUDA
  for (const FunctionEventAvg* r : rows) {
    name_width = std::max(name_width, text_length(r->key) + 4);
    shapes_width = std::max(shapes_width, text_length(r->input_shapes) + 4);
    any_shapes |= has_shapes(*r);
    any_node_id |= r->node_id != -1;
    for (const std::string& entry : r->stack) {
      src_width = std::max(src_width, text_length(entry) + 4);
      any_stack = true;
    }
    if (r->flops > 0 && (min_flops == 0 || r->flops < min_flops)) min_flops = r->flops;
    sum_self_us += ns_to_us(r->self_cpu_time_total_ns);
    has_cuda_time |= r->self_cuda_time_total_ns > 0;
    has_cuda_memory |= r->self_cuda_memory_usage > 0;
    any_device_row |= r->is_device;
    (r->is_device ? sum_self_cuda_us : sum_operators_self_cuda_us) +=
        ns_to_us(r->self_cuda_time_total_ns);
  }
  if (!any_device_row) sum_self_cuda_us = sum_operators_self_cuda_us;
  name_width = std::min(name_width, static_cast<std::size_t>(options.max_name_column_width));
  shapes_width = std::min(shapes_width, static_cast<std::size_t>(options.max_shapes_column_width));
  src_width = std::min(src_width, static_cast<std::size_t>(options.max_src_column_width));

  Layout layout;
  layout.add_column("Name", name_width);
  for (const char* header :
       {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"}) {
    layout.add_column(header, kDefaultWidth);
  }
  if (has_cuda_time) {
    for (const char* header : {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"}) {
      layout.add_column(header, kDefaultWidth);
    }
  }
  if (profile_memory) {
    layout.add_column("CPU Mem", kDefaultWidth);
    layout.add_column("Self CPU Mem", kDefaultWidth);
    if (has_cuda_memory) {
      layout.add_column("CUDA Mem", kDefaultWidth);
      layout.add_column("Self CUDA Mem", kDefaultWidth);
    }
  }
  layout.add_column("# of Calls", kDefaultWidth);
  if (any_node_id) layout.add_column("Node ID", kDefaultWidth);
  if (any_shapes) layout.add_column("Input Shapes", shapes_width);
  const std::size_t src_column = layout.size();
  if (any_stack) layout.add_column("Source Location", src_width, /*left_aligned=*/true);
  // FLOPs are scaled by the unit of the smallest positive count.
  const bool show_flops = with_flops && min_flops > 0;
  double flops_scale = 1;
  if (show_flops) {
    static constexpr const char* kUnits[] = {"FLOPs",  "KFLOPs", "MFLOPs",
                                             "GFLOPs", "TFLOPs", "PFLOPs"};
    double level = std::clamp(std::log10(static_cast<double>(min_flops)) / 3, 0.0, 5.0);
    flops_scale = std::pow(10.0, std::floor(level) * -3.0);
    layout.add_column(fmt::format("Total {}", kUnits[static_cast<int>(level)]), kDefaultWidth);
  }

  std::string out;
  if (!options.header.empty()) {
    out.append(layout.line_length(), '=').append("\n").append(options.header).append("\n");
  }
  if (options.top_level_events_only) {
    out.append(layout.line_length(), '=');
    out += "\nThis report only display top-level ops statistics\n";
  }
  layout.append_separator(out);
  layout.append_headers(out);
  layout.append_separator(out);

  const auto name_limit = static_cast<std::size_t>(std::max(options.max_name_column_width - 3, 0));
  std::vector<std::string> cells;
  int shown = 0;
  for (const FunctionEventAvg* r : rows) {
    if (shown == options.row_limit) break;
    if (options.top_level_events_only && !r->top_level) continue;
    ++shown;

    std::string name = r->key;
    if (text_length(name) >= name_limit) name = std::string(text_prefix(name, name_limit)) + "...";
    const double self_us = ns_to_us(r->self_cpu_time_total_ns);
    const double total_us = ns_to_us(r->cpu_time_total_ns);
    const double avg_us = r->count == 0 ? 0.0 : total_us / static_cast<double>(r->count);
    cells = {
        std::move(name),
        format_share(self_us, sum_self_us),
        format_time(self_us),
        r->is_async ? "0" : format_share(total_us, sum_self_us),  // async: not a share of a thread
        format_time(total_us),
        format_time(avg_us),
    };
    if (has_cuda_time) {
      const double self_cuda_us = ns_to_us(r->self_cuda_time_total_ns);
      cells.push_back(format_time(self_cuda_us));
      cells.push_back(format_share(self_cuda_us, sum_self_cuda_us));
      cells.push_back(format_time(ns_to_us(r->cuda_time_total_ns)));
      cells.push_back(format_time(r->cuda_time_avg_ns() / 1000.0));
    }
    if (profile_memory) {
      cells.push_back(format_memory(r->cpu_memory_usage));
      cells.push_back(format_memory(r->self_cpu_memory_usage));
      if (has_cuda_memory) {
        cells.push_back(format_memory(r->cuda_memory_usage));
        cells.push_back(format_memory(r->self_cuda_memory_usage));
      }
    }
    cells.push_back(std::to_string(r->count));
    if (any_node_id) cells.push_back(std::to_string(r->node_id));
    if (any_shapes) cells.emplace_back(text_prefix(r->input_shapes, shapes_width));
    if (any_stack) cells.push_back(r->stack.empty() ? "" : trim_path(r->stack[0], src_width));
    if (show_flops) {
      cells.push_back(r->flops <= 0
                          ? "--"
                          : fmt::format("{:8.3f}", static_cast<double>(r->flops) * flops_scale));
    }
    layout.append_row(out, cells);

    if (any_stack) {
      // The rest of the stack under the source column, then an empty row between operators.
      std::vector<std::string> blank(layout.size());
      for (std::size_t i = 1; i < std::min(r->stack.size(), kMaxStackEntries); ++i) {
        blank[src_column] = trim_path(r->stack[i], src_width);
        layout.append_row(out, blank);
      }
      blank[src_column].clear();
      layout.append_row(out, blank);
    }
  }

  layout.append_separator(out);
  out += "Self CPU time total: " + format_time(sum_self_us) + "\n";
  if (has_cuda_time) out += "Self CUDA time total: " + format_time(sum_self_cuda_us) + "\n";
  return out;
}

}  // namespace opscope

namespace opscope::internal {

std::vector<std::string_view> table_sort_keys() {
  std::vector<std::string_view> names;
  for (const SortKey& key : kSortKeys) names.push_back(key.name);
  return names;
}

std::vector<const FunctionEventAvg*> table_order(const KeyAverages& avg, std::string_view sort_by) {
  return in_order(avg.rows(), sort_by.empty() ? nullptr : &find_sort_key(std::string(sort_by)));
}

}  // namespace opscope::internal
