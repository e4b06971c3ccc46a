"""The README's example runs as written and does what the text says."""

import os
import re
import subprocess
import sys
from pathlib import Path

import opscope

from conftest import complete_events, load_trace

# The repository's README, whose Python section holds the torch.profiler example.
README = Path(__file__).resolve().parent.parent.parent / "README.md"


def test_readme_example_runs(tmp_path):
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
              if "on_trace_ready=trace_handler" in b]
    assert len(blocks) == 1, "the README has one torch.profiler schedule example"
    result = subprocess.run(
        [sys.executable, "-c", blocks[0]],
        cwd=tmp_path,
        # The package this suite imports, whatever the working directory.
        env=dict(os.environ, PYTHONPATH=str(Path(opscope.__file__).resolve().parent.parent)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # Two windows, two tables, two traces.
    assert result.stdout.count("Self CPU time total:") == 2
    assert sorted(os.listdir(tmp_path)) == ["trace_4.json", "trace_8.json"]
    for name, steps in (("trace_4.json", {2, 3}), ("trace_8.json", {6, 7})):
        trace = load_trace(tmp_path / name)
        recorded = {int(e["name"].split("#")[1]) for e in complete_events(trace) if e["name"].startswith("ProfilerStep#")}
        assert recorded == steps
        assert len(complete_events(trace, "forward")) == 2
        assert len(complete_events(trace, "matmul")) == 4
    assert "warn" not in result.stderr.lower(), result.stderr
