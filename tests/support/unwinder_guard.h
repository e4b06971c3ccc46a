// Selects the stack unwinder for one test and restores the previous one after it.
#pragma once

#include "record/stack_capture.h"

namespace opscope::testing {

class UnwinderGuard {
 public:
  explicit UnwinderGuard(record::Unwinder u) : previous_(record::unwinder()) {
    record::set_unwinder(u);
  }
  ~UnwinderGuard() { record::set_unwinder(previous_); }
  UnwinderGuard(const UnwinderGuard&) = delete;
  UnwinderGuard& operator=(const UnwinderGuard&) = delete;

 private:
  record::Unwinder previous_;
};

}  // namespace opscope::testing
