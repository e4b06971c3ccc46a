#!/usr/bin/python3
"""Runs Holistic Trace Analysis's own test suite against opscope and judges it by a manifest.

Each test file of ``../shared/peers/hta-tests/tests`` runs in its own pytest process (HTA's
``HTAEnvOptions`` is a process-wide singleton read once, so a file that sets an HTA environment
variable in its setUpClass must be the first to read it), with ``opscope_hta_plugin`` loaded:
HTA's ``TraceAnalysis`` and ``TraceDiff`` (and the public names of its critical-path module) are
opscope's before any test module imports them. No test is edited.

``expected.txt`` beside this file says, test by test, what each must do against opscope:
``pass``, or why it cannot (``data``: its trace is not in ``../shared``; ``private``: it reads
HTA internals that have no public equivalent). Every test the suite collects must be listed
(a new test of HTA's is not silently ignored). The run fails when a ``pass`` test does not pass,
when a listed test is not collected, or when a test is not listed. A test listed otherwise that
passes is reported, so the manifest can be tightened.

    tests/hta/run_suite.py --package build/python            # opscope, judged by the manifest
    tests/hta/run_suite.py --peer hta --files test_trace_diff.py   # HTA itself, for comparison
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = os.path.normpath(os.path.join(ROOT, "..", "shared", "peers"))
# What the manifest may say of a test: it must pass against opscope, or why it need not (its
# trace is not in ../shared; it reads HTA internals opscope does not have; it fails under HTA
# itself on this machine for a reason named).
VERDICTS = ("pass", "hta", "private", "data", "hta-fails")


def read_manifest(path: str) -> Dict[str, Tuple[str, str]]:
    """{test id: (verdict, reason)} from lines "file::Class::test  verdict  reason..."."""
    out: Dict[str, Tuple[str, str]] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[1] not in VERDICTS:
                sys.exit(f"{path}:{number}: expected 'TEST VERDICT [reason]' with VERDICT one of {VERDICTS}, got {line!r}")
            out[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return out


def run_file(name: str, args, env: Dict[str, str], out_dir: str) -> Dict[str, str]:
    """{test id: outcome} of one test file run in its own pytest process."""
    xml = os.path.join(out_dir, name + ".xml")
    log = os.path.join(out_dir, name + ".log")
    cmd = [sys.executable, "-m", "pytest", "-p", "opscope_hta_plugin", "-p", "no:cacheprovider",
           "-q", "--no-header", "-rfE", f"--junitxml={xml}", os.path.join("tests", name)]
    with open(log, "w", encoding="utf-8") as f:
        try:
            subprocess.run(cmd, cwd=args.suite, env=env, stdout=f, stderr=subprocess.STDOUT,
                           timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            print(f"{name}: timed out after {args.timeout} s (log: {log})")
    outcomes: Dict[str, str] = {}
    if not os.path.exists(xml):
        return outcomes
    for case in ET.parse(xml).getroot().iter("testcase"):
        test = f"{name}::{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        outcomes[test] = outcome
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default=os.path.join(ROOT, "build", "python"),
                        help="the folder holding the built opscope package (default: build/python)")
    parser.add_argument("--suite", default=os.path.join(PEERS, "hta-tests"),
                        help="HTA's test tree (default: ../shared/peers/hta-tests)")
    parser.add_argument("--hta", default=os.path.join(PEERS, "hta"),
                        help="HTA's package (default: ../shared/peers/hta)")
    parser.add_argument("--peer", choices=("opscope", "hta"), default="opscope",
                        help="whose classes the tests get (hta: HTA's own, for comparison)")
    parser.add_argument("--files", nargs="*", help="only these test files (default: all)")
    parser.add_argument("--manifest", default=os.path.join(HERE, "expected.txt"))
    parser.add_argument("--timeout", type=int, default=900, help="seconds per test file")
    parser.add_argument("--log-dir", help="keep each file's pytest log and junit XML here")
    args = parser.parse_args()

    tests_dir = os.path.join(args.suite, "tests")
    if not os.path.isdir(tests_dir):
        print(f"HTA's test suite is not at {tests_dir} (../shared/peers/hta-tests)")
        return 2
    files = args.files or sorted(
        n for n in os.listdir(tests_dir) if n.startswith("test_") and n.endswith(".py"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, os.path.abspath(args.package), args.hta,
                                         args.suite])
    env["TEST_DATA_PREFIX_PATH"] = args.suite  # where HTA's get_test_data_dir looks
    env["OPSCOPE_HTA_PEER"] = args.peer
    env.pop("HTA_DISABLE_NS_ROUNDING", None)  # the tests set what they need themselves

    out_dir = args.log_dir or tempfile.mkdtemp(prefix="opscope-hta-suite-")
    os.makedirs(out_dir, exist_ok=True)
    outcomes: Dict[str, str] = {}
    for name in files:
        t0 = time.monotonic()
        got = run_file(name, args, env, out_dir)
        counts = {k: sum(1 for v in got.values() if v == k) for k in ("passed", "failed", "skipped")}
        print(f"{name:40s} {counts['passed']:4d} passed {counts['failed']:4d} failed "
              f"{counts['skipped']:3d} skipped  {time.monotonic() - t0:6.1f} s")
        outcomes.update(got)

    if args.peer == "hta":
        for test, outcome in sorted(outcomes.items()):
            print(f"{outcome:8s} {test}")
        return 0

    manifest = read_manifest(args.manifest)
    problems: List[str] = []
    for test, outcome in sorted(outcomes.items()):
        if test not in manifest:
            problems.append(f"not in {os.path.basename(args.manifest)}: {test} ({outcome})")
            continue
        verdict, _ = manifest[test]
        if verdict in ("pass", "hta") and outcome != "passed":
            problems.append(f"{outcome}: {test} (see {out_dir}/{test.split('::')[0]}.log)")
        elif verdict not in ("pass", "hta") and outcome == "passed":
            print(f"note: passes now, listed as {verdict}: {test}")
    ran = set(files)
    listed = {t: v for t, (v, _) in manifest.items() if t.split("::")[0] in ran}
    for test in sorted(listed):
        if test not in outcomes:
            problems.append(f"listed but not collected: {test}")

    def count(verdict: str, passing: bool = False) -> int:
        return sum(1 for t, v in listed.items()
                   if v == verdict and (not passing or outcomes.get(t) == "passed"))

    print(f"\nHTA's suite against opscope: {count('pass', True)} of {count('pass')} tests that "
          f"reach opscope's classes pass; {count('hta', True)} of {count('hta')} tests of HTA's "
          f"own internals pass beside them; not expected to pass: {count('private')} read HTA "
          f"internals, {count('data')} need traces not in ../shared, {count('hta-fails')} fail "
          f"under HTA itself here (logs: {out_dir})")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
