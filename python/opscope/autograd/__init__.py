"""opscope.autograd: the shape of ``torch.autograd`` that profiling code uses
(``opscope.autograd.profiler``)."""

from . import profiler  # noqa: F401
