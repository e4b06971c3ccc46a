#include "opscope/version.h"

// OPSCOPE_VERSION_STRING comes from the project() version in CMakeLists.txt.
namespace opscope {

const char* version() noexcept { return OPSCOPE_VERSION_STRING; }

}  // namespace opscope
