"""A cache of Holistic Trace Analysis's answers for the scripts that run it as a test oracle
(hta_report.py, hta_diff.py), so that the suite's builds (release, ASan, TSan, the Debian 13
root) run HTA once per question instead of once per build.

    answer(script, hta_dir, inputs, args, out, live)

With OPSCOPE_HTA_CACHE unset this is `live()` and nothing else: HTA runs as it always did.
With it set to a folder, the answer (the bytes `live` writes to `out`) is kept there under a key
made of everything HTA's answer can depend on, each by content, never by path or time:

- the asking script and this file (what question is asked, and how the answer is kept);
- every file of the HTA package in `hta_dir` (its code and its configs), by relative path;
- every file under each of `inputs` (the trace folders HTA reads), by relative path;
- `args`, the question's arguments (a report name, diff flags; not the output path);
- the environment variables HTA or the scripts read: HTA_*, CRITICAL_PATH_* (HTA's
  configs/env_options.py), OPSCOPE_HTA_* (the pattern report's operator);
- the Python version and the versions of HTA's dependencies (pandas, numpy, ...), read from
  their package metadata without importing them.

Entries are CACHE/<question>/<dependencies>.json: the question's key names a folder, the
dependencies' key the file in it. Where HTA cannot run (its dependencies are missing, as in a
Debian root without plotly: `live` would exit 3), any answer to the same question is taken, the
one HTA gave with the dependencies of the machine that could run it; with none stored the
script exits 3 as before. A hit imports neither HTA nor pandas.

Only answers HTA gave (exit 0) are kept. Each entry is written to a temporary file in its folder
and renamed into place, so parallel tests never read half an entry.
"""
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile

ENV = "OPSCOPE_HTA_CACHE"

# What HTA imports from outside the standard library (the first two are what the scripts check
# before running it; scripts/setup-deps installs the rest).
NEEDED = ("pandas", "plotly")
DEPENDENCIES = ("pandas", "numpy", "plotly", "networkx", "PyYAML", "pydot", "psutil", "ijson")
# The environment HTA reads (hta/configs/env_options.py) and the scripts' own settings.
ENV_PREFIXES = ("HTA_", "CRITICAL_PATH_", "OPSCOPE_HTA_")


def _hash_file(h, path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)


def _hash_tree(h, root, skip_dirs=()):
    """Every regular file under `root` (a folder or one file): its path relative to `root` and
    its bytes, in a fixed order."""
    if os.path.isfile(root):
        h.update(f"file\0{os.path.getsize(root)}\0".encode())
        _hash_file(h, root)
        return
    if not os.path.isdir(root):
        raise SystemExit(f"hta_answers: {root!r} is neither a file nor a folder")
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        for name in sorted(files):
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, root)
            h.update(f"{len(rel)}:{rel}\0{os.path.getsize(path)}\0".encode())
            _hash_file(h, path)


def question_key(script, hta_dir, inputs, args, environ=None):
    """The key of everything but the dependencies' versions (see the module's comment)."""
    environ = os.environ if environ is None else environ
    h = hashlib.sha256(b"opscope hta answer 1\0")
    for path in (script, __file__):
        h.update(b"script\0")
        _hash_file(h, path)
    h.update(b"hta\0")
    _hash_tree(h, hta_dir, skip_dirs=("__pycache__",))
    for path in inputs:
        h.update(b"input\0")
        _hash_tree(h, path)
    for arg in args:
        h.update(f"arg\0{len(arg)}:{arg}".encode())
    for name in sorted(environ):
        if name.startswith(ENV_PREFIXES) and name != ENV:
            h.update(f"env\0{name}={environ[name]}\0".encode())
    return h.hexdigest()


def dependencies():
    """(whether HTA can run here, a key of the Python version and its dependencies' versions).
    Neither imports anything of them: find_spec only locates a top-level module."""
    can_run = all(importlib.util.find_spec(m) is not None for m in NEEDED)
    versions = [f"python {sys.version_info[0]}.{sys.version_info[1]}"]
    for name in DEPENDENCIES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return can_run, hashlib.sha256("\n".join(versions).encode()).hexdigest()[:32]


def _store(folder, name, out):
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as dst, open(out, "rb") as src:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, os.path.join(folder, name))
    except BaseException:
        os.unlink(tmp)
        raise


def _copy(entry, out):
    # Through a temporary file too: `out` is whole or absent, as when HTA writes it.
    tmp = out + ".tmp"
    shutil.copyfile(entry, tmp)
    os.replace(tmp, out)


def answer(script, hta_dir, inputs, args, out, live):
    """Writes HTA's answer to `out`: the cached one, or `live()`'s (which writes `out` itself
    and exits non-zero through SystemExit when it cannot answer)."""
    cache = os.environ.get(ENV)
    if not cache:
        live()
        return
    folder = os.path.join(cache, question_key(script, hta_dir, inputs, args))
    can_run, deps = dependencies()
    entry = os.path.join(folder, deps + ".json")
    if os.path.isfile(entry):
        _copy(entry, out)
        os.utime(entry)  # read recently: scripts/test keeps it
        return
    if not can_run:
        try:
            stored = sorted(n for n in os.listdir(folder) if not n.startswith(".tmp-"))
        except FileNotFoundError:
            stored = []
        if stored:
            _copy(os.path.join(folder, stored[0]), out)
            return
    live()  # exits 3 here when HTA cannot run and nothing is stored
    _store(folder, deps + ".json", out)
