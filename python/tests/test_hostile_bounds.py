"""Issue 40, bounds, from Python: a gzip bomb and an oversized event are refused with a
RuntimeError that names the limit (max_gzip_ratio, max_event_size) and read when it is raised;
gzip with trailing garbage is refused as the command line refuses it. Inputs are generated here."""

import pickle
import zlib

import pytest

import opscope._C as _C


def kernel(i):
    return ('{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":5,'
            '"args":{"device":0,"stream":7}}' % (1000 + 10 * i))


def write_bomb(path):
    """80 MiB of text in about 80 KB of gzip: 1000 kernels, each followed by 80 KiB of spaces."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    spaces = b" " * (80 << 10)
    parts = [c.compress(b'{"traceEvents":[')]
    for i in range(1000):
        parts.append(c.compress((("," if i else "") + kernel(i)).encode() + spaces))
    parts.append(c.compress(b'],"distributedInfo":{"rank":0}}'))
    parts.append(c.flush())
    path.write_bytes(b"".join(parts))
    return str(path)


def test_gzip_bomb_refused_with_the_limit_and_read_when_raised(tmp_path):
    bomb = write_bomb(tmp_path / "bomb.json.gz")
    with pytest.raises(RuntimeError, match=r"bomb\.json\.gz: its gzip text inflates past 67108864 "
                       r"bytes.*max_gzip_ratio=N \(Python\)"):
        _C.TraceFile(bomb)
    t = _C.TraceFile(bomb, max_gzip_ratio=0)
    assert t.rank == 0
    # Unpickled, it is read again within the limits it was read within.
    again = pickle.loads(pickle.dumps(t))
    assert again.rank == 0
    with pytest.raises(ValueError, match="max_gzip_ratio"):
        _C.TraceFile(bomb, max_gzip_ratio=-1)


def test_analysis_takes_the_limits(tmp_path):
    pytest.importorskip("pandas")
    from opscope.analysis import TraceAnalysis

    bomb = write_bomb(tmp_path / "bomb.json.gz")
    with pytest.raises(RuntimeError, match="--max-gzip-ratio"):
        TraceAnalysis(trace_files=[bomb])
    TraceAnalysis(trace_files=[bomb], max_gzip_ratio=0)


def test_event_size_limit(tmp_path):
    p = tmp_path / "big_event.json"
    p.write_text('{"traceEvents":[%s,{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,'
                 '"ts":1,"dur":1,"args":{"blob":"%s"}}]}' % (kernel(0), "x" * (3 << 20)))
    with pytest.raises(RuntimeError, match=r"an event holds more than 1048576 bytes.*"
                       r"max_event_size=BYTES \(Python\)"):
        _C.TraceFile(str(p), max_event_size=1 << 20)
    _C.TraceFile(str(p))


def test_gzip_trailing_garbage_refused_with_its_byte(tmp_path):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = c.compress(('{"traceEvents":[%s]}' % kernel(0)).encode()) + c.flush()
    p = tmp_path / "garbage.json.gz"
    p.write_bytes(gz + b"garbage!")
    with pytest.raises(RuntimeError, match="trailing garbage: the 8 bytes from byte %d on" % len(gz)):
        _C.TraceFile(str(p))
