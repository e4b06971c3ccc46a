"""opscope: a profiler for C++ and Python programs, with torch.profiler's API.

``opscope.profiler`` is the module to use (``profile``, ``schedule``, ``record_function``,
``tensorboard_trace_handler``, ...); see its documentation and python/README.md.
"""

from . import _C
from . import profiler

__version__ = _C.__version__

__all__ = ["profiler", "__version__"]
