"""Traces that are not JSON, not regular files, or too large for the memory the process may
take, read through the Python API (issue 40): refused with RuntimeError naming the file, the
byte and what is wrong, as `opscope analyze` refuses them; never a hang, never MemoryError
without the file. The inputs are made here.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from opscope import _C

BASE = (
    '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 8, '
    '"ts": 100, "dur": 50, "args": {"Input Dims": [[2, 3]]}}], "traceName": "t"}'
)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def test_what_is_not_json_is_refused_at_its_byte(tmp_path):
    assert _C.TraceFile(_write(tmp_path, "base.json", BASE)).rank == -1  # read, no rank
    for name, text, bad, what in [
        ("zero", BASE.replace("[[2, 3]]", "[[2, 03]]"), BASE.index("[[2, 3]]") + 5, "leading zero"),
        ("point", BASE.replace('"ts": 100', '"ts": .5'), BASE.index('"ts": 100') + 6,
         "expected a value"),
        ("nan", BASE.replace('"pid": 7', '"pid": NaN'), BASE.index('"pid": 7') + 7,
         "expected a value"),
        ("twice", BASE.replace('"traceName"', '"traceEvents": [], "traceName"'),
         BASE.index('"traceName"'), 'second top-level "traceEvents"'),
        ("garbage", BASE + " x", len(BASE) + 1, "unexpected text after"),
    ]:
        path = _write(tmp_path, name + ".json", text)
        with pytest.raises(RuntimeError) as e:
            _C.TraceFile(path)
        message = str(e.value)
        assert re.match(re.escape(f"cannot read trace {path}: malformed JSON at byte {bad}") + "[ :]",
                        message), message
        assert what in message, message


def test_truncated_and_empty_files_say_so(tmp_path):
    cut = _write(tmp_path, "cut.json", BASE[:60])
    with pytest.raises(RuntimeError, match=r"cut\.json: truncated at byte 60 \(the text ends"):
        _C.TraceFile(cut)
    empty = _write(tmp_path, "empty.json", "")
    with pytest.raises(RuntimeError, match=r"empty\.json: the file is empty"):
        _C.TraceFile(empty)


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = str(tmp_path / "x.json")
    os.mkfifo(fifo)
    # In a child with a timeout: a reader that waits for a writer would hang the suite.
    code = textwrap.dedent(
        f"""
        from opscope import _C
        try:
            _C.TraceFile({fifo!r})
        except RuntimeError as e:
            print(e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert f"cannot read trace {fifo}: it is a FIFO (named pipe)" in out.stdout, out


def test_out_of_memory_is_a_runtime_error_naming_the_file(tmp_path):
    # One event whose args hold a 160 MB string: its piece and simdjson's index of it take more
    # than the 1 GB of address space the child may have.
    path = str(tmp_path / "large_event.json")
    with open(path, "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                '"ts": 1, "dur": 1, "args": {"blob": "')
        block = "a" * (1 << 20)
        for _ in range(160):
            f.write(block)
        f.write('"}}]}')
    code = textwrap.dedent(
        f"""
        import resource
        from opscope import _C
        resource.setrlimit(resource.RLIMIT_AS, (1000000 * 1024, resource.RLIM_INFINITY))
        try:
            _C.TraceFile({path!r}, max_event_size=0)  # past the 64 MiB an event may hold
            print("read")
        except RuntimeError as e:
            print("RuntimeError:", e)
        except MemoryError as e:
            print("MemoryError:", e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out
    assert out.stdout.startswith(
        f"RuntimeError: cannot read trace {path}: out of memory while reading it"), out
