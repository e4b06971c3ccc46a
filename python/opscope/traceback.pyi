import traceback as _traceback
from typing import List, Optional

class CapturedTraceback:
    """A Python stack captured by capture(): code objects and instruction offsets, formatted
    on demand. Takes attributes; len() is its frame count."""

    def __len__(self) -> int: ...
    def summary(self) -> _traceback.StackSummary:
        """The frames, outermost first, as traceback.extract_stack() gives them."""
        ...
    def format(self) -> List[str]:
        """The frames as traceback.format_list() lines, outermost first."""
        ...

def capture(limit: Optional[int] = None) -> CapturedTraceback:
    """Captures the calling thread's Python stack (its innermost `limit` frames) without
    keeping its frames alive."""
    ...

__all__ = ["CapturedTraceback", "capture"]
