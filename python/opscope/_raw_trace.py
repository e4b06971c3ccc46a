"""HTA's ``Trace.write_raw_trace`` seam for the traces opscope writes (opscope.analysis).

HTA's ``TraceAnalysis.generate_trace_with_counters`` builds each rank's trace as a dict and hands
it to ``Trace.write_raw_trace(output_file, trace_contents)``; HTA's own test
(``test_generate_trace_with_counters``) patches that method and reads the dict it was given.
opscope writes the trace in C++ (every original event byte for byte, no float of a timestamp
re-printed), so the dict it hands over is a ``RawTrace``: a read-only mapping over the file the
engine wrote under a temporary name beside the output, parsed only when read. ``Trace``'s
``write_raw_trace`` then moves that file into place; a patched one receives the same two
arguments HTA's does and may read them as HTA's test does.

Nothing here imports HTA. Swapping HTA's ``hta.common.trace.Trace`` for this one (as the pytest
plugin of tests/hta swaps ``TraceAnalysis``) is what lets that test's patch see opscope's call.
"""

import gzip
import json
import os
import uuid
import weakref
from collections.abc import Mapping
from typing import Any, Dict, Iterator


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class RawTrace(Mapping):
    """A trace file as the dict ``json.load`` gives, parsed when first read. While it names a
    temporary file (``temporary_beside``), the file goes when the RawTrace does, unless
    ``Trace.write_raw_trace`` moved it into place."""

    def __init__(self, path: str, temporary: bool = False) -> None:
        self.path = path
        self._contents: Any = None
        self._cleanup = weakref.finalize(self, _remove, path) if temporary else None

    @staticmethod
    def temporary_beside(output_file: str) -> str:
        """A name in the output's folder (so that moving it there is a rename) with the same
        ending (so that the engine gzips it, or not, as it would the output)."""
        folder, name = os.path.split(output_file)
        return os.path.join(folder, f".opscope-{uuid.uuid4().hex[:12]}-{name}")

    def _load(self) -> Dict[str, Any]:
        if self._contents is None:
            with open(self.path, "rb") as f:
                gzipped = f.read(2) == b"\x1f\x8b"
            opener = gzip.open if gzipped else open
            with opener(self.path, "rt", encoding="utf-8") as f:
                self._contents = json.load(f)
        return self._contents

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def moved_to(self, output_file: str) -> None:
        os.replace(self.path, output_file)
        self.path = output_file
        if self._cleanup is not None:
            self._cleanup.detach()
            self._cleanup = None


class Trace:
    """What opscope's traces are written through: HTA's ``Trace.write_raw_trace``."""

    def write_raw_trace(self, output_file: str, trace_contents: Mapping) -> None:
        """Writes ``trace_contents`` to ``output_file``: a ``RawTrace`` the engine wrote is
        moved there as written; any other mapping is written as HTA writes one (gzip JSON,
        indented by 2, whatever the name)."""
        if isinstance(trace_contents, RawTrace):
            trace_contents.moved_to(output_file)
            return
        with gzip.open(output_file, "wt") as fp:
            json.dump(dict(trace_contents), fp, indent=2)
