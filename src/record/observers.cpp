#include "record/observers.h"

#include <atomic>
#include <mutex>

#include "collect/collector.h"
#include "opscope/error.h"
#include "opscope/value.h"

namespace opscope {
namespace internal {
namespace {

struct GlobalCallbacks {
  std::mutex mu;  // serialises writers; readers take the snapshot under it too (cheap, rare)
  std::shared_ptr<const CallbackList> list = std::make_shared<const CallbackList>();
};

GlobalCallbacks& globals() {
  static GlobalCallbacks* g = new GlobalCallbacks;  // ranges may end during static destruction
  return *g;
}

std::atomic<CallbackHandle> g_next_handle{1};
std::atomic<int> g_threads_with_callbacks{0};
std::atomic<bool> g_have_global{false};

// Recomputes kStateCallbacks. Serialised so that the last writer always sees the latest
// counts: two concurrent refreshes can otherwise publish their flags in the wrong order.
void refresh_state_flag() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const bool on = g_have_global.load() || g_threads_with_callbacks.load() > 0;
  collect::set_state_flag(kStateCallbacks, on);
}

// The calling thread's list; counts itself out of g_threads_with_callbacks at thread exit.
struct ThreadCallbacks {
  std::shared_ptr<const CallbackList> list;
  ~ThreadCallbacks() {
    if (list && !list->empty()) {
      g_threads_with_callbacks.fetch_sub(1);
      refresh_state_flag();
    }
  }
};
thread_local ThreadCallbacks t_callbacks;

}  // namespace

std::shared_ptr<const CallbackList> global_callbacks() {
  GlobalCallbacks& g = globals();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.list;
}

std::shared_ptr<const CallbackList> thread_callbacks() { return t_callbacks.list; }

void set_thread_callbacks(std::shared_ptr<const CallbackList> list) {
  const bool had = t_callbacks.list && !t_callbacks.list->empty();
  const bool has = list && !list->empty();
  t_callbacks.list = std::move(list);
  if (had != has) {
    g_threads_with_callbacks.fetch_add(has ? 1 : -1);
    refresh_state_flag();
  }
}

OwnedValues::OwnedValues(std::span<const Value> values) {
  values_.reserve(values.size());
  for (const Value& v : values) values_.push_back(copy(v));
}

Value OwnedValues::copy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kTensor: {
      const auto& sizes = ints_.emplace_back(v.sizes().begin(), v.sizes().end());
      const auto& strides = ints_.emplace_back(v.strides().begin(), v.strides().end());
      const auto& dtype = texts_.emplace_back(v.dtype());
      const auto& device = texts_.emplace_back(v.device());
      return Value::tensor(sizes, dtype, strides, device);
    }
    case ValueKind::kString:
      return Value(std::string_view(texts_.emplace_back(v.to_string())));
    case ValueKind::kList: {
      std::vector<Value>& items = lists_.emplace_back();
      items.reserve(v.items().size());
      for (const Value& item : v.items()) items.push_back(copy(item));
      return Value::list(items);
    }
    case ValueKind::kNone:
    case ValueKind::kInt:
    case ValueKind::kDouble:
    case ValueKind::kBool:
      return v;  // self-contained
  }
  return Value();
}

}  // namespace internal

RecordFunctionCallback& RecordFunctionCallback::scopes(std::initializer_list<RecordScope> scopes) {
  scope_mask_ = 0;
  for (RecordScope s : scopes) scope_mask_ |= 1u << static_cast<unsigned>(s);
  return *this;
}

RecordFunctionCallback& RecordFunctionCallback::sampling_prob(double p) {
  if (!(p > 0.0 && p <= 1.0)) {
    throw Error("sampling probability must be in (0, 1], got " + std::to_string(p));
  }
  sampling_prob_ = p;
  return *this;
}

CallbackHandle add_global_callback(RecordFunctionCallback callback) {
  if (!callback.start() && !callback.end()) {
    throw Error("add_global_callback: the callback has neither a start nor an end function");
  }
  auto entry = std::make_shared<const internal::CallbackEntry>(
      internal::CallbackEntry{internal::g_next_handle++, std::move(callback)});
  internal::GlobalCallbacks& g = internal::globals();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto next = std::make_shared<internal::CallbackList>(*g.list);
    next->push_back(entry);
    g.list = std::move(next);
    internal::g_have_global = true;
  }
  internal::refresh_state_flag();
  return entry->handle;
}

CallbackHandle add_thread_local_callback(RecordFunctionCallback callback) {
  if (!callback.start() && !callback.end()) {
    throw Error("add_thread_local_callback: the callback has neither a start nor an end function");
  }
  auto entry = std::make_shared<const internal::CallbackEntry>(
      internal::CallbackEntry{internal::g_next_handle++, std::move(callback)});
  auto next = internal::t_callbacks.list
                  ? std::make_shared<internal::CallbackList>(*internal::t_callbacks.list)
                  : std::make_shared<internal::CallbackList>();
  next->push_back(entry);
  internal::set_thread_callbacks(std::move(next));
  return entry->handle;
}

bool remove_callback(CallbackHandle handle) {
  internal::GlobalCallbacks& g = internal::globals();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto next = std::make_shared<internal::CallbackList>(*g.list);
    if (std::erase_if(*next, [&](const auto& e) { return e->handle == handle; }) > 0) {
      internal::g_have_global = !next->empty();
      g.list = std::move(next);
      internal::refresh_state_flag();
      return true;
    }
  }
  if (internal::t_callbacks.list) {
    auto next = std::make_shared<internal::CallbackList>(*internal::t_callbacks.list);
    if (std::erase_if(*next, [&](const auto& e) { return e->handle == handle; }) > 0) {
      internal::set_thread_callbacks(std::move(next));
      return true;
    }
  }
  return false;
}

void clear_callbacks() {
  internal::GlobalCallbacks& g = internal::globals();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.list = std::make_shared<const internal::CallbackList>();
    internal::g_have_global = false;
  }
  internal::set_thread_callbacks(nullptr);
  internal::refresh_state_flag();
}

bool has_global_callbacks() { return !internal::global_callbacks()->empty(); }
bool has_thread_local_callbacks() {
  return internal::t_callbacks.list && !internal::t_callbacks.list->empty();
}
bool has_callbacks() { return has_global_callbacks() || has_thread_local_callbacks(); }

}  // namespace opscope
