"""Cheap captures of the Python stack, formatted only when asked.

``capture()`` records the calling thread's Python frames as code objects and instruction
offsets (never frame objects, so nothing the frames own is kept alive) and returns a
``CapturedTraceback``; ``format()`` and ``summary()`` turn it into what the standard
``traceback`` module gives::

    tb = opscope.traceback.capture()
    ...
    print("".join(tb.format()))             # like traceback.format_stack()
    for frame in tb.summary():              # a traceback.StackSummary, outermost first
        print(frame.filename, frame.lineno, frame.name)

A capture costs a pointer walk over the interpreter's frames and one reference per frame; it
takes part in the garbage collector (it may hold attributes, and so sit in a cycle).
"""

from ._C import CapturedTraceback
from ._C import capture_traceback as capture

__all__ = ["CapturedTraceback", "capture"]
