"""The cache of HTA's answers (tests/peers/hta_answers.py) that scripts/test shares between its
builds: a repeated question is answered from the cache without importing HTA or pandas; a
changed trace, report, setting or HTA code is asked again; without OPSCOPE_HTA_CACHE every
question runs HTA. HTA here is a stand-in package that logs each time it is asked, so the test
sees which answers were computed; the scripts that ask it are the real ones. pandas and plotly
are stand-ins too (empty modules: the scripts only check that they import), so that each
computed answer costs no second of importing them.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "..", "..", "tests", "peers")

# What the scripts read of HTA's DataFrames.
FRAME = '''
import json

class DataFrame:
    def __init__(self, rows):
        self.rows = rows

    def reset_index(self):
        return self

    def to_json(self, orient):
        assert orient == "records"
        return json.dumps(self.rows)
'''

FAKE_ANALYSIS = '''
import os
from hta import frame as pd

def _log(what):
    with open(os.environ["FAKE_HTA_LOG"], "a") as f:
        f.write(what + "\\n")

def _bytes(trace_dir):
    return sum(os.path.getsize(os.path.join(trace_dir, n)) for n in sorted(os.listdir(trace_dir)))

class _Trace:
    traces = {0: None}

class TraceAnalysis:
    def __init__(self, trace_dir):
        _log("analysis " + trace_dir)
        self.t = _Trace()
        self.trace_dir = trace_dir

    def get_temporal_breakdown(self, visualize):
        return pd.DataFrame([{"rank": 0, "bytes": _bytes(self.trace_dir), "version": 1,
                              "rounding_off": os.environ.get("HTA_DISABLE_NS_ROUNDING")}])

    def get_comm_comp_overlap(self, visualize):
        return pd.DataFrame([{"rank": 0, "overlap": 1.0}])
'''

FAKE_DIFF = '''
import enum
import os
from hta import frame as pd

class DeviceType(enum.Enum):
    CPU = 1
    GPU = 2
    ALL = 3

class LabeledTrace:
    def __init__(self, label, trace_dir):
        with open(os.environ["FAKE_HTA_LOG"], "a") as f:
            f.write("diff " + trace_dir + "\\n")

class TraceDiff:
    @staticmethod
    def compare_traces(control, test, cr, tr, ci, ti, device, short_names):
        return pd.DataFrame([{"name": "op", "device": device.name, "short": short_names}])

    @staticmethod
    def ops_diff(control, test, cr, tr, ci, ti, device):
        return {"added": ["op"]}
'''


@pytest.fixture
def setup(tmp_path):
    hta = tmp_path / "hta"
    (hta / "hta").mkdir(parents=True)
    (hta / "hta" / "__init__.py").write_text("")
    (hta / "hta" / "trace_analysis.py").write_text(FAKE_ANALYSIS)
    (hta / "hta" / "trace_diff.py").write_text(FAKE_DIFF)
    (hta / "hta" / "frame.py").write_text(FRAME)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "pandas.py").write_text("")
    (stubs / "plotly.py").write_text("")
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "rank-0.json").write_text('{"traceEvents": [1, 2]}')
    (traces / "rank-1.json").write_text('{"traceEvents": [3, 4]}')
    log = tmp_path / "asked.log"
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTA_", "OPSCOPE_HTA"))}
    env.update(FAKE_HTA_LOG=str(log), OPSCOPE_HTA_CACHE=str(cache), PYTHONPATH=str(stubs))

    def asked():
        return log.read_text().splitlines() if log.exists() else []

    def report(name="temporal", extra_env=None, python_flags=(), trace_dir=traces):
        out = tmp_path / "out.json"
        if out.exists():
            out.unlink()
        run_env = dict(env, **(extra_env or {}))
        run_env = {k: v for k, v in run_env.items() if v is not None}
        r = subprocess.run(
            [sys.executable, *python_flags, os.path.join(PEERS, "hta_report.py"), str(hta),
             str(trace_dir), name, str(out)],
            env=run_env, capture_output=True, text=True)
        return r, (out.read_text() if out.exists() else None)

    def diff(*flags):
        out = tmp_path / "diff.json"
        if out.exists():
            out.unlink()
        r = subprocess.run(
            [sys.executable, os.path.join(PEERS, "hta_diff.py"), str(hta), str(traces),
             str(traces), str(out), *flags],
            env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(out.read_text())

    return dict(hta=hta, traces=traces, cache=cache, asked=asked, report=report, diff=diff)


def imported_modules(importtime_stderr):
    """The modules `python -X importtime` reports as imported."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime_stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_a_repeated_question_is_answered_from_the_cache_without_importing_hta(setup):
    r, first = setup["report"]()
    assert r.returncode == 0, r.stderr
    assert len(setup["asked"]()) == 1
    assert json.loads(first)["temporal"][0]["bytes"] == 46

    r, second = setup["report"](python_flags=("-X", "importtime"))
    assert r.returncode == 0, r.stderr
    assert second == first
    assert len(setup["asked"]()) == 1, "HTA was asked again"
    modules = imported_modules(r.stderr)
    assert "hashlib" in modules  # the importtime listing works
    assert not {m for m in modules if m.split(".")[0] in ("hta", "pandas", "numpy", "plotly")}

    # The answer is the stored one, byte for byte: an entry changed in the cache is what comes
    # back (the cache is trusted, never re-checked against HTA).
    (entry,) = [p for p in setup["cache"].rglob("*.json")]
    entry.write_text('{"stored": true}')
    r, third = setup["report"]()
    assert third == '{"stored": true}'
    assert not [p for p in setup["cache"].rglob(".tmp-*")]


def test_a_changed_input_report_setting_or_hta_misses(setup):
    setup["report"]()
    assert len(setup["asked"]()) == 1

    # The same bytes count: a trace changed in place, same size, same name.
    (setup["traces"] / "rank-1.json").write_text('{"traceEvents": [5, 6]}')
    r, _ = setup["report"]()
    assert r.returncode == 0, r.stderr
    assert len(setup["asked"]()) == 2
    # A file renamed, its bytes unchanged.
    os.rename(setup["traces"] / "rank-1.json", setup["traces"] / "rank-2.json")
    setup["report"]()
    assert len(setup["asked"]()) == 3

    # Another report.
    r, out = setup["report"]("overlap")
    assert json.loads(out) == {"overlap": [{"rank": 0, "overlap": 1.0}]}
    assert len(setup["asked"]()) == 4

    # HTA's setting: its answer with and without rounding are two answers.
    r, out = setup["report"](extra_env={"HTA_DISABLE_NS_ROUNDING": "1"})
    assert json.loads(out)["temporal"][0]["rounding_off"] == "1"
    assert len(setup["asked"]()) == 5
    r, out = setup["report"](extra_env={"HTA_DISABLE_NS_ROUNDING": "1"})
    assert len(setup["asked"]()) == 5  # and the second of each is cached

    # HTA's code.
    module = setup["hta"] / "hta" / "trace_analysis.py"
    module.write_text(module.read_text().replace('"version": 1', '"version": 2'))
    r, out = setup["report"]()
    assert json.loads(out)["temporal"][0]["version"] == 2
    assert len(setup["asked"]()) == 6

    # The same trace folder's contents at another path is the same question.
    moved = setup["traces"].parent / "elsewhere"
    os.rename(setup["traces"], moved)
    r, out = setup["report"](trace_dir=moved)
    assert json.loads(out)["temporal"][0]["version"] == 2
    assert len(setup["asked"]()) == 6


def test_without_the_variable_hta_runs_every_time(setup):
    for n in (1, 2):
        r, out = setup["report"](extra_env={"OPSCOPE_HTA_CACHE": None})
        assert r.returncode == 0, r.stderr
        assert len(setup["asked"]()) == n
    assert not setup["cache"].exists()


def test_where_hta_cannot_run_a_stored_answer_is_used_else_exit_3(setup):
    # python -S and no stand-ins: no pandas or plotly, as in a root without HTA's dependencies
    # (their versions, read from the package metadata, are absent too).
    missing = {"PYTHONPATH": None}
    r, out = setup["report"](python_flags=("-S",), extra_env=missing)
    assert r.returncode == 3 and "HTA needs pandas" in r.stderr
    assert out is None

    r, first = setup["report"]()
    r, out = setup["report"](python_flags=("-S",), extra_env=missing)
    assert r.returncode == 0, r.stderr
    assert out == first
    assert len(setup["asked"]()) == 1


def test_diff_flags_are_part_of_the_question(setup):
    assert setup["diff"]()["ops_diff"][0]["device"] == "ALL"
    assert setup["diff"]("--device", "cpu")["ops_diff"][0]["device"] == "CPU"
    assert setup["diff"]("--device", "cpu", "--short-names")["ops_diff"][0]["short"] is True
    assert len(setup["asked"]()) == 6  # two LabeledTraces per live diff
    assert setup["diff"]("--device", "cpu")["ops_diff"][0]["device"] == "CPU"
    assert len(setup["asked"]()) == 6
