// key_averages(): one row per distinct event key, in order of first appearance.
//
// A window holds millions of events but only hundreds of distinct names, and the collector
// interns names, so events from one call site share one name pointer. Grouping therefore
// happens in two passes: a flat hash table keyed by the name's (pointer, length) accumulates
// every event with no string hashing or comparison, and a second pass merges the few groups
// whose name text is equal (the same name from two call sites, or a dynamic name). 1 M events
// take a few milliseconds (bench/table_bench.cpp).
#include "opscope/key_averages.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "opscope/error.h"

namespace opscope {
namespace {

// What makes two events the same row. Only the name today: when the shape and stack lenses
// land, their interned ids join here (equal text must give equal ids, as for names), and
// key_of(), the hash and text_equal() below grow with them.
struct GroupKey {
  std::string_view name;
};

GroupKey key_of(const Event& e) { return GroupKey{e.name}; }

bool text_equal(const GroupKey& a, const GroupKey& b) { return a.name == b.name; }

struct TextHash {
  std::size_t operator()(const GroupKey& k) const { return std::hash<std::string_view>{}(k.name); }
};
struct TextEqual {
  bool operator()(const GroupKey& a, const GroupKey& b) const { return text_equal(a, b); }
};

// Sums of one group of events.
struct Partial {
  GroupKey key;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t self_ns = 0;
  bool is_async = false;
  bool top_level = false;

  void add(const Event& e) {
    ++count;
    total_ns += e.duration_ns();
    self_ns += e.self_ns;
    is_async |= e.kind == EventKind::kAsyncRange;
    top_level |= e.parent < 0;
  }
  void merge(const Partial& o) {
    count += o.count;
    total_ns += o.total_ns;
    self_ns += o.self_ns;
    is_async |= o.is_async;
    top_level |= o.top_level;
  }
};

// Open addressing on the name's address and length: identity, not text. Linear probing over a
// power-of-two table kept at most half full; a few hundred entries stay in L1.
class IdentityTable {
 public:
  IdentityTable() : slots_(256) {}

  // The index into `partials` of the group for `key`, created (in first-seen order) if new.
  std::size_t find_or_add(const GroupKey& key, std::vector<Partial>& partials) {
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.data == key.name.data() && s.size == key.name.size() && s.index >= 0) {
        return static_cast<std::size_t>(s.index);
      }
      if (s.index < 0) {
        s = Slot{key.name.data(), key.name.size(), static_cast<std::int64_t>(partials.size())};
        partials.push_back(Partial{key});
        if (2 * partials.size() > slots_.size()) grow();
        return partials.size() - 1;
      }
    }
  }

 private:
  struct Slot {
    const char* data = nullptr;
    std::size_t size = 0;
    std::int64_t index = -1;  // -1: empty
  };

  static std::size_t hash(const GroupKey& key) {
    auto x = reinterpret_cast<std::uintptr_t>(key.name.data()) ^ (key.name.size() << 48);
    x *= 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: spreads aligned addresses
    return static_cast<std::size_t>(x >> 20);
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.index < 0) continue;
      std::size_t i = hash(GroupKey{std::string_view(s.data, s.size)}) & mask;
      while (slots_[i].index >= 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
};

}  // namespace

KeyAverages key_averages(const ProfilerResult& result, bool group_by_input_shape,
                         int group_by_stack_n) {
  if (group_by_stack_n < 0) {
    throw Error("key_averages: group_by_stack_n must be >= 0 (0 = do not group by stack), got " +
                std::to_string(group_by_stack_n));
  }
  // Shapes and stacks are not recorded yet, so both groupings are by name alone for now.
  (void)group_by_input_shape;

  std::vector<Partial> partials;
  IdentityTable table;
  for (const Event& e : result.events()) {
    if (e.kind == EventKind::kInstant) continue;
    partials[table.find_or_add(key_of(e), partials)].add(e);
  }

  // Merge groups with equal text. Groups were created in order of first appearance, so the
  // first group of each text is its earliest event and the rows keep first-seen order.
  std::unordered_map<GroupKey, std::size_t, TextHash, TextEqual> row_of;
  row_of.reserve(partials.size());
  std::vector<Partial> merged;
  merged.reserve(partials.size());
  for (const Partial& p : partials) {
    auto [it, added] = row_of.try_emplace(p.key, merged.size());
    if (added) {
      merged.push_back(p);
    } else {
      merged[it->second].merge(p);
    }
  }

  std::vector<FunctionEventAvg> rows;
  rows.reserve(merged.size());
  for (const Partial& p : merged) {
    FunctionEventAvg row;
    row.key = std::string(p.key.name);
    row.count = p.count;
    row.cpu_time_total_ns = p.total_ns;
    row.self_cpu_time_total_ns = p.self_ns;
    row.is_async = p.is_async;
    row.top_level = p.top_level;
    rows.push_back(std::move(row));
  }
  return KeyAverages(std::move(rows));
}

}  // namespace opscope
