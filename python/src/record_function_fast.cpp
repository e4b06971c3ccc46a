// RecordFunctionFast: a range as a C-level context manager (work in progress).
#include "bindings.h"

namespace opscope::python {

void bind_record_function_fast(pybind11::module_& m) { (void)m; }

}  // namespace opscope::python
