"""Argument checks of the public API: a wrong type raises TypeError naming the call, the
parameter and the types allowed ("profile(): record_shapes must be a bool, got str 'yes'"),
before the native module would answer with its list of C++ signatures."""

from __future__ import annotations

import operator
import os
import sys
import warnings
from typing import Any, Optional


def got(value: Any) -> str:
    """What was given, for a message: its type and (shortened) repr."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def fail(call: str, name: str, allowed: str, value: Any) -> TypeError:
    """The TypeError for parameter `name` of `call` given `value` where `allowed` fits."""
    return TypeError(f"{call}: {name} must be {allowed}, got {got(value)}")


def flag(call: str, name: str, value: Any) -> bool:
    """A bool parameter: True, False (and the ints 0 and 1, which the native module took)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    kind = type(value)
    # numpy's bool (numpy.bool_; named numpy.bool in numpy 2), without importing numpy.
    if kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"):
        return bool(value)
    raise fail(call, name, "a bool (True or False)", value)


def integer(call: str, name: str, value: Any) -> int:
    """An int parameter: an int or anything that is one (numpy's integers), never a bool."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise fail(call, name, "an int", value)


def number(call: str, name: str, value: Any) -> float:
    """A real-number parameter: an int or a float (numpy's too), never a bool."""
    if not isinstance(value, bool):
        try:
            return float(operator.index(value))
        except TypeError:
            pass
        if isinstance(value, float) or type(value).__module__ == "numpy":
            try:
                return float(value)
            except (TypeError, ValueError):
                pass
    raise fail(call, name, "a number (int or float)", value)


def text(call: str, name: str, value: Any, *, optional: bool = False) -> Optional[str]:
    """A str parameter (or None when `optional`)."""
    if isinstance(value, str) or (optional and value is None):
        return value
    raise fail(call, name, "a str or None" if optional else "a str", value)


def path(call: str, name: str, value: Any) -> str:
    """A file path parameter: a str or an os.PathLike (pathlib.Path) naming one."""
    if isinstance(value, (str, os.PathLike)):
        result = os.fspath(value)
        if isinstance(result, str):
            return result
    raise fail(call, name, "a str or os.PathLike (a file path)", value)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_frame():
    """The first frame outside the opscope package, and its stacklevel for warnings.warn
    called from this module's caller."""
    level = 2  # 1 would be the function in this module, 2 its caller
    frame = sys._getframe(2)
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            _PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return frame, level


def warn(message: str, category: type = UserWarning) -> None:
    """warnings.warn at the caller's line: the first frame outside the opscope package (so a
    warning raised in profile.__init__ points at the user's ``profile(...)``, not here)."""
    warnings.warn(message, category, stacklevel=_user_frame()[1])


def caller() -> str:
    """Where the user's code called into the package: "file.py:12"."""
    frame = _user_frame()[0]
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
