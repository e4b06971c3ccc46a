// The C API capsule (opscope._C._C_API, python/include/opscope/python_capi.h): extensions
// record into this module's opscope without linking their own copy of it.
#include <new>
#include <string_view>

#include "bindings.h"
#include "common.h"
#include "opscope/python_capi.h"
#include "opscope/record_function.h"

struct OpscopeRange {
  explicit OpscopeRange(std::string_view name, opscope::RecordScope scope) : range(name, scope) {}
  opscope::RecordFunction range;
};

namespace opscope::python {

namespace {

OpscopeRange* range_begin(const char* name, std::size_t name_len, int scope) {
  // Nothing records: no allocation, no range.
  if (internal::g_state.load(std::memory_order_relaxed) == 0) return nullptr;
  const RecordScope s =
      scope == OPSCOPE_CAPI_USER_SCOPE ? RecordScope::kUserScope : RecordScope::kFunction;
  auto* range = new (std::nothrow) OpscopeRange(std::string_view(name, name_len), s);
  if (range != nullptr && !range->range.is_active()) {
    delete range;
    return nullptr;
  }
  return range;
}

void range_end(OpscopeRange* range) { delete range; }  // the destructor ends the range

constexpr OpscopeCApi kApi = {OPSCOPE_CAPI_VERSION, sizeof(OpscopeCApi), range_begin, range_end};

}  // namespace

void bind_capi(py::module_& m) {
  m.add_object("_C_API",
               py::capsule(static_cast<const void*>(&kApi), OPSCOPE_CAPI_CAPSULE));
}

}  // namespace opscope::python
