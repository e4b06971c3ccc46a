"""The GPU run's scripts where there is no GPU (tests/gpu/README.md): compare_traces.py on the
traces that run left (tests/data/gpu), and torch_side.py's CPU rehearsal, which goes through
every step of PyTorch's side with Debian's torch, so that the one prepared run on a GPU machine
does not fail on the script itself."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GPU = os.path.join(ROOT, "tests", "gpu")
DATA = os.path.join(ROOT, "tests", "data", "gpu")
OURS = os.path.join(DATA, "opscope-h200", "launch_check.json.gz")
TORCH = os.path.join(DATA, "torch-2.11-h200", "torch_side.json.gz")


def test_compare_traces_summarises_the_h200_traces(tmp_path):
    out = tmp_path / "summary.txt"
    run = subprocess.run([sys.executable, os.path.join(GPU, "compare_traces.py"), OURS, TORCH,
                          "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    lines = text.splitlines()
    # The kernel counts side by side: 16 of launch_check, 17 of torch (its zero_ is a kernel).
    kernels = lines[lines.index("kernels") + 1].split("|")
    assert [k.strip() for k in kernels] == ["16", "17"], text
    assert "DIFFERENCES" in text
    assert "cuda_sync" in text


def test_compare_traces_refuses_what_is_not_a_trace(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2")
    run = subprocess.run([sys.executable, os.path.join(GPU, "compare_traces.py"), str(bad), TORCH],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "x.json" in run.stderr + run.stdout


def test_torch_side_rehearses_every_step_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    run = subprocess.run([sys.executable, os.path.join(GPU, "torch_side.py"), str(tmp_path),
                          "--rehearse-cpu"], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_SIDE_LAUNCH_ROUNDS="20"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["torch_launch.json", "torch_table.txt",
                                            "torch_trace.json.gz"]
    launch = json.loads((tmp_path / "torch_launch.json").read_text())["launch"]
    assert launch["unprofiled_ns"] > 0 and launch["profiled_cpu_cuda_ns"] > 0
