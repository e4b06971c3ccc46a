// The native part of opscope.profiler.record_function: a USER_SCOPE range with a dynamic
// name, begun by __enter__ and ended by __exit__ on the C++ RecordFunction.
//
// __enter__ and __exit__ are the C++ methods themselves (the Python subclass only adds the
// decorator form), so a `with record_function(...)` block runs no Python frame of opscope's.
// With no session active a range is one relaxed load and a branch in C++; what remains is
// the cost of the Python calls.
#include <optional>
#include <span>
#include <string>

#include "bindings.h"
#include "common.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace opscope::python {

namespace {

class PyRecordFunction {
 public:
  PyRecordFunction(std::string name, std::optional<std::string> args)
      : name_(std::move(name)), args_(std::move(args)) {}

  void enter() {
    if (range_) {
      throw py::value_error("record_function('" + name_ +
                            "') is already entered; use a new record_function for a nested "
                            "or concurrent range");
    }
    range_.emplace(RecordScope::kUserScope);
    // `args` is recorded as the range's one input, and only when someone records inputs
    // (record_shapes), as torch's record_function does.
    if (args_ && range_->wants_inputs()) {
      const Value input(*args_);
      range_->before(name_, std::span<const Value>(&input, 1));
    } else {
      range_->before(name_);
    }
  }

  void exit() { range_.reset(); }

  const std::string& name() const { return name_; }
  const std::optional<std::string>& args() const { return args_; }

 private:
  std::string name_;
  std::optional<std::string> args_;
  std::optional<RecordFunction> range_;
};

}  // namespace

void bind_record_function(py::module_& m) {
  py::class_<PyRecordFunction>(m, "_RecordFunction", py::dynamic_attr())
      .def(py::init<std::string, std::optional<std::string>>(), py::arg("name"),
           py::arg("args") = py::none())
      .def(
          "__enter__",
          [](py::object self) {
            self.cast<PyRecordFunction&>().enter();
            return self;
          })
      .def(
          "__exit__",
          [](PyRecordFunction& self, const py::args&) {
            self.exit();
            return false;
          })
      .def_property_readonly("name", &PyRecordFunction::name)
      .def_property_readonly("args", &PyRecordFunction::args);
}

}  // namespace opscope::python
