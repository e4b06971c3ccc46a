"""opscope: a profiler for C++ and Python programs, with torch.profiler's API.

``opscope.profiler`` is the module to use (``profile``, ``schedule``, ``record_function``,
``tensorboard_trace_handler``, ...); see its documentation and python/README.md.
"""

from . import _C
from . import profiler
from . import traceback
from ._C import ModuleScope as module

__version__ = _C.__version__

__all__ = ["profiler", "traceback", "module", "get_include", "__version__"]


def __getattr__(name):
    # opscope.analysis (HTA's TraceAnalysis) needs pandas: imported on first use only, so that
    # `import opscope` stays light for a program that only profiles.
    if name == "analysis":
        import importlib

        return importlib.import_module(".analysis", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_include() -> str:
    """The folder to add to an extension's include path for ``opscope/python_capi.h``, the C
    API through which C and C++ extensions record ranges into opscope's session."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
