// Module scopes (opscope/module.h): entering a module names it twice, once as the hierarchy
// path that ranges inside carry ("Model.Linear_0") and once as the stack label that
// capture_stack interleaves with native frames ("nn.Module: Linear_0"). Both are interned
// here, on entry, so the hot path of a range only copies a 32-bit id.
//
// Cost: a model enters a module around every few operators, so entering one must cost about
// what a range does. Interning both texts each time (two joined strings, two hash lookups)
// cost ~105 ns; a per-thread direct-mapped cache keyed by (parent path, name pointer) and
// checked against the name's text makes a module seen before cost a pointer hash and a short
// compare (bench/stack_bench.cpp, BM_ModuleEnter). The text check keeps it right when a
// pointer is reused for another name (a std::string's buffer).
#include "opscope/module.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "collect/string_table.h"

namespace opscope {

namespace internal {
constinit thread_local const ModuleFrame* t_module __attribute__((tls_model(OPSCOPE_TLS_MODEL))) =
    nullptr;
}  // namespace internal

namespace {

constexpr std::string_view kLabelPrefix = "nn.Module: ";

// Interns a + b + c, built in a stack buffer when it fits.
std::uint32_t intern_joined(std::string_view a, std::string_view b, std::string_view c) {
  char buffer[256];
  const std::size_t size = a.size() + b.size() + c.size();
  if (size <= sizeof(buffer)) {
    // string_view::copy, not memcpy: an empty view may have a null data().
    a.copy(buffer, a.size());
    b.copy(buffer + a.size(), b.size());
    c.copy(buffer + a.size() + b.size(), c.size());
    return collect::intern({buffer, size});
  }
  std::string joined;
  joined.reserve(size);
  joined.append(a).append(b).append(c);
  return collect::intern(joined);
}

constexpr std::uint32_t kNoParent = UINT32_MAX;

// The ids of one (parent path, name) seen before on this thread.
struct CachedModule {
  std::uint32_t parent_path = kNoParent;
  std::uint32_t path_id = 0;
  std::uint32_t label_id = 0;
  const char* name = nullptr;  // the pointer it was entered with, nullptr: empty slot
  std::string text;            // and the text it pointed to then
};

// 64 slots: a model's modules per thread; a collision only costs the slow path.
thread_local std::array<CachedModule, 64> t_modules;

std::size_t slot_of(std::uint32_t parent_path, const char* name) {
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(name) ^ (std::uint64_t{parent_path} << 32);
  h *= 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> 58);  // top 6 bits: 64 slots
}

}  // namespace

void ModuleScope::enter(const char* name) noexcept {
  if (name == nullptr) name = "";
  const std::string_view n(name);
  const internal::ModuleFrame* parent = internal::t_module;
  const std::uint32_t parent_path = parent != nullptr ? parent->path_id : kNoParent;
  try {
    CachedModule& c = t_modules[slot_of(parent_path, name)];
    if (c.name != name || c.parent_path != parent_path || c.text != n) [[unlikely]] {
      const std::uint32_t path_id = parent != nullptr
                                        ? intern_joined(collect::interned(parent->path_id), ".", n)
                                        : collect::intern(n);
      const std::uint32_t label_id = intern_joined(kLabelPrefix, n, {});
      c.text.assign(n);  // may throw: the slot is marked filled only after
      c.parent_path = parent_path;
      c.path_id = path_id;
      c.label_id = label_id;
      c.name = name;
    }
    frame_ = internal::ModuleFrame{parent, this, c.path_id, c.label_id};
  } catch (...) {
    return;  // out of memory while interning: the module is not entered, nothing is thrown
  }
  internal::t_module = &frame_;
  entered_ = true;
}

}  // namespace opscope
