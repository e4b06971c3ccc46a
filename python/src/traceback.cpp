// opscope.traceback: cheap Python stack capture (work in progress).
#include "bindings.h"

namespace opscope::python {

void bind_traceback(pybind11::module_& m) { (void)m; }

}  // namespace opscope::python
