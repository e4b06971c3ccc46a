#include "collect/string_table.h"

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "collect/raw_dump.h"

namespace opscope::collect {
namespace {

// Lets the per-thread cache be searched with a string_view without building a std::string.
struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

struct Table {
  std::shared_mutex mu;
  std::deque<std::string> texts;  // deque: elements never move, so views stay valid
  std::unordered_map<std::string_view, std::uint32_t> ids;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: ranges may end during static destruction
  return *t;
}

}  // namespace

std::uint32_t intern(std::string_view name) {
  // Per-thread cache keyed by the text; bounded so a stream of unique names cannot grow it
  // without limit.
  thread_local std::unordered_map<std::string, std::uint32_t, TextHash, std::equal_to<>> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;

  Table& t = table();
  std::uint32_t id;
  {
    std::unique_lock<std::shared_mutex> lock(t.mu);
    if (auto it = t.ids.find(name); it != t.ids.end()) {
      id = it->second;
    } else {
      id = static_cast<std::uint32_t>(t.texts.size());
      const std::string& stored = t.texts.emplace_back(name);
      t.ids.emplace(stored, id);
    }
  }
  if (cache.size() >= 4096) cache.clear();
  cache.emplace(name, id);
  return id;
}

std::string_view interned(std::uint32_t id) {
  Table& t = table();
  std::shared_lock<std::shared_mutex> lock(t.mu);
  // An id no intern() gave (a damaged record) reads as this rather than out of bounds.
  if (id >= t.texts.size()) return "<unknown name>";
  return t.texts[id];
}

namespace raw {

bool write_interned_names(RawWriter& out) noexcept {
  Table& t = table();
  if (!t.mu.try_lock_shared()) return false;  // held by a thread that will not finish now
  for (std::size_t id = 0; id < t.texts.size(); ++id) {
    const std::string& text = t.texts[id];
    const RawInterned head{static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(text.size())};
    out.section(Section::kInterned, sizeof head + text.size());
    out.put(&head, sizeof head);
    out.put(text.data(), text.size());
  }
  t.mu.unlock_shared();
  return true;
}

}  // namespace raw
}  // namespace opscope::collect
