#include "analysis/flops.h"

#include <mutex>
#include <set>
#include <string>

#include "opscope/error.h"

namespace opscope::analysis {
namespace {

enum class Formula { kNone, kMm, kAddmm, kBmm, kBaddbmm, kConv2d, kElementwise };

Formula formula_of(std::string_view name) {
  if (name.starts_with("aten::")) name.remove_prefix(6);
  if (name == "mm") return Formula::kMm;
  if (name == "addmm") return Formula::kAddmm;
  if (name == "bmm") return Formula::kBmm;
  if (name == "baddbmm") return Formula::kBaddbmm;
  if (name == "conv2d") return Formula::kConv2d;
  if (name == "mul" || name == "add") return Formula::kElementwise;
  return Formula::kNone;
}

// Thrown inside this file only: the inputs do not fit the formula.
struct Misfit {
  std::string why;
};

const RecordedValue& tensor(std::span<const RecordedValue> in, std::size_t i, std::size_t rank) {
  if (i >= in.size() || in[i].kind != ValueKind::kTensor) {
    throw Misfit{"input " + std::to_string(i) + " is not a tensor"};
  }
  if (rank != 0 && in[i].sizes.size() != rank) {
    throw Misfit{"input " + std::to_string(i) + " has " + std::to_string(in[i].sizes.size()) +
                 " dimensions, expected " + std::to_string(rank)};
  }
  for (std::int64_t s : in[i].sizes) {
    if (s < 0) throw Misfit{"input " + std::to_string(i) + " has a negative size"};
  }
  return in[i];
}

// Element `k` of an int-list input (stride, padding, ...), or `fallback` when absent.
std::int64_t list_item(std::span<const RecordedValue> in, std::size_t i, std::size_t k,
                       std::int64_t fallback) {
  if (i >= in.size() || in[i].kind == ValueKind::kNone) return fallback;
  const RecordedValue& v = in[i];
  if (v.kind == ValueKind::kInt) return v.i;
  if (v.kind != ValueKind::kList || v.items.empty()) {
    throw Misfit{"input " + std::to_string(i) + " is not a list of ints"};
  }
  const RecordedValue& item = v.items[k < v.items.size() ? k : 0];
  if (item.kind != ValueKind::kInt) {
    throw Misfit{"input " + std::to_string(i) + " is not a list of ints"};
  }
  return item.i;
}

std::int64_t matmul(const RecordedValue& a, const RecordedValue& b, std::int64_t batch) {
  const std::size_t r = a.sizes.size();
  const std::int64_t m = a.sizes[r - 2], k = a.sizes[r - 1];
  if (b.sizes[r - 2] != k) {
    throw Misfit{"inner sizes differ (" + std::to_string(k) + " and " +
                 std::to_string(b.sizes[r - 2]) + ")"};
  }
  if (r == 3 && b.sizes[0] != batch) throw Misfit{"batch sizes differ"};
  return 2 * batch * m * k * b.sizes[r - 1];
}

std::int64_t compute(Formula f, std::span<const RecordedValue> in) {
  switch (f) {
    case Formula::kNone: return 0;
    case Formula::kMm: return matmul(tensor(in, 0, 2), tensor(in, 1, 2), 1);
    case Formula::kAddmm: return matmul(tensor(in, 1, 2), tensor(in, 2, 2), 1);
    case Formula::kBmm: {
      const RecordedValue& a = tensor(in, 0, 3);
      return matmul(a, tensor(in, 1, 3), a.sizes[0]);
    }
    case Formula::kBaddbmm: {
      const RecordedValue& a = tensor(in, 1, 3);
      return matmul(a, tensor(in, 2, 3), a.sizes[0]);
    }
    case Formula::kConv2d: {
      // conv2d(input, weight, bias, stride, padding, dilation, groups)
      const RecordedValue& x = tensor(in, 0, 4);
      const RecordedValue& w = tensor(in, 1, 4);
      const std::int64_t groups = list_item(in, 6, 0, 1);
      if (groups <= 0) throw Misfit{"groups must be positive"};
      const std::int64_t n = x.sizes[0], c_in = x.sizes[1];
      const std::int64_t c_out = w.sizes[0], kh = w.sizes[2], kw = w.sizes[3];
      if (w.sizes[1] * groups != c_in) {
        throw Misfit{"weight has " + std::to_string(w.sizes[1]) + " input channels per group, " +
                     "input has " + std::to_string(c_in) + " channels in " +
                     std::to_string(groups) + " groups"};
      }
      std::int64_t out[2];
      for (std::size_t d = 0; d < 2; ++d) {
        const std::int64_t stride = list_item(in, 3, d, 1);
        const std::int64_t pad = list_item(in, 4, d, 0);
        const std::int64_t dil = list_item(in, 5, d, 1);
        if (stride <= 0 || dil <= 0 || pad < 0) throw Misfit{"bad stride, padding or dilation"};
        const std::int64_t k = d == 0 ? kh : kw;
        out[d] = (x.sizes[2 + d] + 2 * pad - dil * (k - 1) - 1) / stride + 1;
        if (out[d] <= 0) throw Misfit{"the kernel is larger than the padded input"};
      }
      return 2 * n * out[0] * out[1] * kh * kw * c_in * c_out / groups;
    }
    case Formula::kElementwise: {
      std::int64_t numel = 1;
      for (std::int64_t s : tensor(in, 0, 0).sizes) numel *= s;
      return numel;
    }
  }
  return 0;
}

void warn_once(std::string_view name, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.emplace(name).second) return;
  }
  warn("with_flops: the inputs of " + std::string(name) + " do not fit its FLOP formula (" +
       why + "); counting 0 FLOPs for such calls");
}

}  // namespace

bool has_flop_formula(std::string_view name) { return formula_of(name) != Formula::kNone; }

std::int64_t estimate_flops(std::string_view name, std::span<const RecordedValue> inputs) {
  const Formula f = formula_of(name);
  if (f == Formula::kNone) return 0;
  try {
    return compute(f, inputs);
  } catch (const Misfit& m) {
    warn_once(name, m.why);
    return 0;
  }
}

std::int64_t flops_of(const ProfilerResult& result, const Event& event) {
  const EventDetail* d = result.detail(event);
  if (d == nullptr) return 0;
  if (d->flops >= 0) return d->flops;
  if (!d->has_inputs) return 0;
  return estimate_flops(event.name, d->inputs);
}

}  // namespace opscope::analysis
