// opscope/module.h: module scopes for the with_modules lens.
//
// A module is a named part of a model (PyTorch's nn.Module). Entering one for the rest of a
// block makes every range recorded inside carry the module hierarchy path, and, with
// with_stack, adds "nn.Module: <name>" frames to their call stacks, as PyTorch does:
//
//   Tensor Linear::forward(const Tensor& x) {
//     OPSCOPE_MODULE("Linear_0");        // ranges inside: module path "Model.Linear_0"
//     OPSCOPE_RECORD_FUNCTION("aten::linear");
//     ...
//   }
//
// Costs one relaxed load and a branch when no session records modules.
#pragma once

#include <atomic>
#include <cstdint>

#include "opscope/internal/collector.h"
#include "opscope/internal/tls.h"
#include "opscope/record_function.h"

namespace opscope {

namespace internal {
// One entered module on the calling thread. Lives in the ModuleScope that entered it.
struct ModuleFrame {
  const ModuleFrame* parent;
  // Where the scope lives on the stack: places its stack frame. nullptr for a module entered
  // by foreign code (Python's opscope.module): the foreign stack provider places it
  // (src/record/stack_capture.h).
  const void* stack_address;
  std::uint32_t path_id;      // interned "Model.Linear_0"
  std::uint32_t label_id;     // interned "nn.Module: Linear_0"
};
// The innermost module entered on the calling thread, or nullptr.
extern constinit thread_local const ModuleFrame* t_module
    __attribute__((tls_model(OPSCOPE_TLS_MODEL)));
}  // namespace internal

class ModuleScope {
 public:
  // `name` is copied when recorded; it need not outlive the scope.
  explicit ModuleScope(const char* name) noexcept {
    if (internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensModules)
        [[unlikely]] {
      enter(name);
    }
  }
  ~ModuleScope() {
    if (entered_) internal::t_module = frame_.parent;
  }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  [[gnu::noinline]] void enter(const char* name) noexcept;

  internal::ModuleFrame frame_;
  bool entered_ = false;
};

}  // namespace opscope

// Enters module `name` for the rest of the enclosing block.
#define OPSCOPE_MODULE(name) \
  ::opscope::ModuleScope OPSCOPE_CONCAT_(opscope_module_, __LINE__)(name)
