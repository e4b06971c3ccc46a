// Code that only reads results includes none of the hot path: opscope/result.h brings the
// small types header (opscope/types.h), not the range header and its collector. This file
// includes result.h first and alone, so it fails to compile when result.h pulls them in again.
#include "opscope/result.h"

#ifdef OPSCOPE_RECORD_FUNCTION
#error "opscope/result.h includes opscope/record_function.h (the hot path); use opscope/types.h"
#endif

#include <gtest/gtest.h>

namespace opscope {
namespace result_header_test {

TEST(ResultHeaderTest, ReadersSeeTheSharedTypesWithoutTheRangeHeader) {
  Event e;
  e.scope = RecordScope::kUserScope;
  MemoryUse m;
  m.category = MemoryCategory::kActivation;
  EXPECT_EQ(e.scope, RecordScope::kUserScope);
  EXPECT_EQ(m.device.type, DeviceType::kCPU);
}

}  // namespace result_header_test
}  // namespace opscope
