#!/usr/bin/env python3
"""PyTorch's side of issue 35's device run: the work of tests/gpu/launch_check.cu, in torch.

    python3 tests/gpu/torch_side.py OUT_DIR [--rehearse-cpu]

Two CUDA streams, a host-to-device copy into each (stream a from pinned memory, stream b from
pageable memory), 8 kernels per stream alternating x.mul_(1.001) / x.add_(0.5) on 1<<20 floats,
an allocation, a clear (x.zero_(), and a real cudaMemsetAsync through the CUDA runtime torch
loaded, when it can be found), a device-to-host copy, torch.cuda.synchronize() and a CUDA event
recorded and synchronized, each inside a record_function range named like launch_check's, under
torch.profiler with CPU and CUDA activities, over two profiler windows.

Writes to OUT_DIR (few files: the device run brings back at most 8 in all):
  torch_trace.json.gz   the first window's Kineto trace (the second one's facts are printed)
  torch_table.txt       key_averages().table(sort_by="self_cuda_time_total", row_limit=25)
  torch_launch.json     Kineto's per-launch cost and the facts printed below

Prints, for the engineer: torch / CUDA versions and the device; the runtime and driver call
names Kineto wrote; the categories; the cuda_sync events' layout; the launch cost line
"torch launch: N ns unprofiled, M ns profiled (+D ns)".

Never hangs: a watchdog (faulthandler) is re-armed at every step; a step that outlives it
prints every thread's stack and ends the process (exit 1). Without torch or without a CUDA
device it says so and exits 0 ("skipped"); --rehearse-cpu then runs the same steps on the CPU
(no streams, no CUDA activity) so that the script itself is tested where there is no GPU.

Environment: TORCH_SIDE_STEP_LIMIT_S (watchdog per step, 60), TORCH_SIDE_LIMIT_S (overall, 150),
TORCH_SIDE_LAUNCH_ROUNDS (200), TORCH_SIDE_KEEP_W2=1 keeps the second window's trace too.
"""

import faulthandler
import gzip
import json
import os
import shutil
import statistics
import sys
import time

N = 1 << 20
KERNELS_PER_STREAM = 8
LAUNCH_ROUNDS = int(os.environ.get("TORCH_SIDE_LAUNCH_ROUNDS", "200"))
LAUNCHES_PER_ROUND = 64
STEP_LIMIT_S = float(os.environ.get("TORCH_SIDE_STEP_LIMIT_S", "60"))
TOTAL_LIMIT_S = float(os.environ.get("TORCH_SIDE_LIMIT_S", "150"))

_START = time.monotonic()


def step(what):
    """Prints a step marker and re-arms the watchdog for the step that follows."""
    elapsed = time.monotonic() - _START
    print(f"[torch_side {elapsed:6.1f}s] {what}", flush=True)
    left = TOTAL_LIMIT_S - elapsed
    if left <= 1:
        print(f"[torch_side] over the overall limit of {TOTAL_LIMIT_S:.0f} s; stopping", flush=True)
        sys.exit(1)
    faulthandler.dump_traceback_later(min(STEP_LIMIT_S, left), exit=True)


def skip(why):
    faulthandler.cancel_dump_traceback_later()
    print(f"[torch_side] skipped: {why}", flush=True)
    sys.exit(0)


def find_cudart(torch):
    """The CUDA runtime library torch has loaded (ctypes handle), or None with the reason.

    RTLD_NOLOAD first, so that the copy torch uses is the one called, never a second one."""
    import ctypes

    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
            return lib, name + " (already loaded)"
        except OSError:
            pass
    # The pip layout: site-packages/nvidia/cu13/lib or nvidia/cuda_runtime/lib.
    site = os.path.dirname(os.path.dirname(torch.__file__))
    for sub in ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib"):
        for name in names:
            path = os.path.join(site, sub, name)
            if os.path.exists(path):
                try:
                    return ctypes.CDLL(path), path
                except OSError:
                    pass
    return None, "no libcudart loaded by torch nor under " + site + "/nvidia"


class Work:
    """The steps of launch_check.cu, on CUDA (two streams) or, rehearsing, on the CPU."""

    def __init__(self, torch, cuda):
        import contextlib

        self.torch = torch
        self.cuda = cuda
        dev = "cuda" if cuda else "cpu"
        self.dev = dev
        self.host_pinned = torch.ones(N).pin_memory() if cuda else torch.ones(N)
        self.host_pageable = torch.ones(N)
        self.host_out = torch.empty(N).pin_memory() if cuda else torch.empty(N)
        self.d = [torch.empty(N, device=dev), torch.empty(N, device=dev)]
        if cuda:
            self.streams = [torch.cuda.Stream(), torch.cuda.Stream()]
            self.on = lambda s: torch.cuda.stream(self.streams[s])
        else:
            self.streams = [None, None]
            self.on = lambda s: contextlib.nullcontext()
        self.memset = None
        self.memset_how = "x.zero_() only (no CUDA runtime to call cudaMemsetAsync)"
        if cuda:
            import ctypes

            lib, where = find_cudart(torch)
            if lib is not None:
                fn = lib.cudaMemsetAsync
                fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
                fn.restype = ctypes.c_int
                self.memset = fn
                self.memset_how = "x.zero_() and cudaMemsetAsync from " + where
            else:
                self.memset_how = "x.zero_() only: " + where
        self.scratch = []

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def warm_up(self):
        """Every op once, unprofiled, so that lazy module loading is not in a window."""
        for s in range(2):
            with self.on(s):
                self.d[s].copy_(self.host_pinned, non_blocking=True)
                self.d[s].mul_(1.0)
                self.d[s].add_(0.0)
                self.d[s].zero_()
        self.host_out.copy_(self.d[0])
        self.sync()

    def window(self):
        torch = self.torch
        rf = torch.profiler.record_function
        with rf("copy_in"):
            with self.on(0):
                self.d[0].copy_(self.host_pinned, non_blocking=True)  # pinned: async
            with self.on(1):
                self.d[1].copy_(self.host_pageable, non_blocking=True)  # pageable: staged
        for k in range(KERNELS_PER_STREAM):
            with rf("step"):
                for s, name in ((0, "launch_on_stream_a"), (1, "launch_on_stream_b")):
                    with rf(name), self.on(s):
                        if k % 2 == 0:
                            self.d[s].mul_(1.001)
                        else:
                            self.d[s].add_(0.5)
        with rf("alloc"):
            # A fresh size each window, so the caching allocator has to ask the driver.
            self.scratch.append(torch.empty(N + 4096 * (len(self.scratch) + 1), device=self.dev))
        with rf("clear"), self.on(1):
            self.d[1].zero_()
            if self.memset is not None:
                rc = self.memset(
                    self.d[1].data_ptr(), 0, N * 4, self.streams[1].cuda_stream
                )
                if rc != 0:
                    print(f"[torch_side] cudaMemsetAsync returned {rc}", flush=True)
        with rf("copy_out"), self.on(0):
            self.host_out.copy_(self.d[0], non_blocking=True)  # into pinned memory
        with rf("synchronize"):
            self.sync()
        with rf("event"):
            if self.cuda:
                ev = torch.cuda.Event()
                ev.record(self.streams[0])
                ev.synchronize()

    def launch_ns(self, rounds):
        """Median CPU ns of one tiny launch (y.add_(1) on 32 floats), over rounds of 64."""
        torch = self.torch
        y = torch.zeros(32, device=self.dev)
        per_launch = []
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            for _ in range(LAUNCHES_PER_ROUND):
                y.add_(1)
            t1 = time.perf_counter_ns()
            self.sync()
            per_launch.append((t1 - t0) / LAUNCHES_PER_ROUND)
        return statistics.median(per_launch)


def load_trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {"traceEvents": data}


def facts(trace):
    """What Kineto wrote: the facts the engineer asked for, as a JSON-ready dict."""
    events = trace.get("traceEvents") or []
    cats = {}
    runtime = {}
    sync = []
    copies = {}
    kernels = 0
    flows = 0
    gpu_threads = {}
    gpu_pids = set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_labels":
            if str((e.get("args") or {}).get("labels", "")).startswith("GPU"):
                gpu_pids.add(e.get("pid"))
    for e in events:
        cat = e.get("cat")
        cats[str(cat)] = cats.get(str(cat), 0) + 1
        if cat in ("cuda_runtime", "cuda_driver"):
            # With CUPTI's callback id: Kineto names calls from its own cbid table.
            key = f"{cat}: {e.get('name')} (cbid {(e.get('args') or {}).get('cbid')})"
            runtime[key] = runtime.get(key, 0) + 1
        elif cat in ("cuda_sync", "cuda_event") and len(sync) < 8:
            sync.append({k: e.get(k) for k in ("cat", "name", "pid", "tid", "ts", "dur", "args")})
        elif cat in ("gpu_memcpy", "gpu_memset"):
            key = f"{cat}: {e.get('name')} ({(e.get('args') or {}).get('bytes')} bytes)"
            copies[key] = copies.get(key, 0) + 1
        elif cat == "kernel":
            kernels += 1
        elif cat == "ac2g":
            flows += 1
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in gpu_pids:
            gpu_threads[f"{e.get('pid')}/{e.get('tid')}"] = (e.get("args") or {}).get("name")
    return {
        "top_level_keys": sorted(k for k in trace if k != "traceEvents"),
        "categories": dict(sorted(cats.items())),
        "runtime_calls": dict(sorted(runtime.items())),
        "kernels": kernels,
        "copies_and_memsets": dict(sorted(copies.items())),
        "ac2g_events": flows,
        "cuda_sync_examples": sync,
        "gpu_threads": gpu_threads,
        "deviceProperties": trace.get("deviceProperties"),
    }


def print_facts(label, f):
    print(f"--- {label}: top-level keys: {', '.join(f['top_level_keys'])}", flush=True)
    print(f"--- {label}: categories: " + ", ".join(f"{k} {v}" for k, v in f["categories"].items()))
    print(f"--- {label}: kernels {f['kernels']}, ac2g events {f['ac2g_events']}")
    print(f"--- {label}: runtime/driver call names Kineto wrote:")
    for k, v in f["runtime_calls"].items():
        print(f"      {v:6d}  {k}")
    print(f"--- {label}: copies and memsets:")
    for k, v in f["copies_and_memsets"].items():
        print(f"      {v:6d}  {k}")
    print(f"--- {label}: cuda_sync / cuda_event events (first {len(f['cuda_sync_examples'])}):")
    for s in f["cuda_sync_examples"]:
        print("      " + json.dumps(s, sort_keys=True))
    print(f"--- {label}: GPU threads (pid/tid: name):")
    for k, v in sorted(f["gpu_threads"].items()):
        print(f"      {k}: {v}")
    if f["deviceProperties"]:
        print(f"--- {label}: deviceProperties[0]: " + json.dumps(f["deviceProperties"][0]))
    else:
        print(f"--- {label}: no deviceProperties")
    sys.stdout.flush()


def export(prof, out_dir, name):
    """Exports the window's trace as OUT_DIR/name.json.gz; returns that path."""
    raw = os.path.join(out_dir, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    return raw + ".gz"


def table_of(prof):
    """key_averages().table() sorted by self CUDA time; torch 2.x may call it self_device_time."""
    averages = prof.key_averages()
    for key in ("self_cuda_time_total", "self_device_time_total"):
        try:
            return key, averages.table(sort_by=key, row_limit=25)
        except (AttributeError, KeyError, ValueError, RuntimeError) as err:
            last = err
    return "none", f"(no table: {last})"


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    rehearse = "--rehearse-cpu" in argv[1:]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    step("importing torch")
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except Exception as err:  # any import failure means there is no usable torch here
        skip(f"no torch ({type(err).__name__}: {err}) in {sys.executable}")
    step(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}, "
         f"Kineto {torch.autograd.kineto_available()}; asking for a CUDA device")
    cuda = torch.cuda.is_available()
    if not cuda and not rehearse:
        skip(f"no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False)")
    if cuda:
        props = torch.cuda.get_device_properties(0)
        print(f"device: {torch.cuda.get_device_name(0)}, capability "
              f"{props.major}.{props.minor}, {props.total_memory >> 20} MiB, "
              f"{torch.cuda.device_count()} device(s); CUDA runtime {torch.version.cuda}",
              flush=True)
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    else:
        print("REHEARSAL on the CPU: no CUDA device, no streams, no CUDA activity", flush=True)
        activities = [ProfilerActivity.CPU]

    step("allocating and warming up")
    work = Work(torch, cuda)
    work.warm_up()
    print(f"copy_in: stream a from pinned host memory, stream b from pageable host memory; "
          f"clear: {work.memset_how}", flush=True)

    results = {"torch": torch.__version__, "cuda": torch.version.cuda,
               "device": torch.cuda.get_device_name(0) if cuda else "cpu (rehearsal)",
               "memset": work.memset_how}
    # Kineto records CUDA synchronizations (cuda_sync, cuda_event) only when asked to.
    experimental = {}
    try:
        config_class = getattr(torch.profiler, "_ExperimentalConfig", None) or \
            torch._C._profiler._ExperimentalConfig
        experimental["experimental_config"] = config_class(enable_cuda_sync_events=True)
        results["cuda_sync_events"] = "asked for (enable_cuda_sync_events=True)"
    except (AttributeError, TypeError) as err:
        results["cuda_sync_events"] = "not available in this torch: " + str(err).splitlines()[0]
    print(f"cuda sync events: {results['cuda_sync_events']}", flush=True)
    for w in (1, 2):
        step(f"window {w}: profiling the work")
        with profile(activities=activities, profile_memory=True, **experimental) as prof:
            work.window()
            work.sync()
        step(f"window {w}: exporting")
        name = "torch_trace" if w == 1 else "torch_trace_w2"
        path = export(prof, out_dir, name)
        f = facts(load_trace(path))
        print_facts(f"window {w}", f)
        if cuda:
            want_memsets = 1 if work.memset is not None else 0
            print(f"--- window {w}: the work launched {2 * KERNELS_PER_STREAM} step kernels + 1 "
                  f"zero_ fill = {2 * KERNELS_PER_STREAM + 1} kernels (found {f['kernels']}), "
                  f"2 HtoD + 1 DtoH copies, {want_memsets} memset(s) of {N * 4} bytes",
                  flush=True)
        results[f"window{w}"] = f
        if w == 1:
            key, table = table_of(prof)
            with open(os.path.join(out_dir, "torch_table.txt"), "w") as out:
                out.write(f"# key_averages().table(sort_by={key!r}, row_limit=25), window 1\n")
                out.write(table + "\n")
            print(f"key_averages().table(sort_by={key!r}), window 1:\n{table}", flush=True)
        else:
            # Only the first window's trace comes back (the file count is limited); the second
            # window's facts are in the log and in torch_launch.json.
            keep = os.environ.get("TORCH_SIDE_KEEP_W2") == "1"
            if not keep:
                os.remove(path)
            print(f"window 2's trace {'kept at ' + path if keep else 'not kept'}", flush=True)

    # Unprofiled, CPU+CUDA and CUDA-only alternated five times (as launch_check alternates its
    # own), so that a drift of the machine falls on every side; medians of the five.
    step("launch cost: unprofiled / CPU and CUDA / CUDA only, alternated 5 times")
    work.launch_ns(20)  # warm
    rounds = max(LAUNCH_ROUNDS // 2, 10)
    u, p, c = [], [], []
    for rep in range(5):
        u.append(work.launch_ns(rounds))
        with profile(activities=activities):
            p.append(work.launch_ns(rounds))
            work.sync()
        if cuda:
            with profile(activities=[ProfilerActivity.CUDA]):
                c.append(work.launch_ns(rounds))
                work.sync()
        print(f"torch launch costs, rep {rep}: {u[-1]:.0f} ns unprofiled, {p[-1]:.0f} CPU+CUDA, "
              f"{c[-1] if c else float('nan'):.0f} CUDA only", flush=True)
    unprofiled = statistics.median(u)
    profiled = statistics.median(p)
    cuda_only = statistics.median(c) if c else None
    step("launch cost: done")
    line = (f"torch launch: {unprofiled:.0f} ns unprofiled, {profiled:.0f} ns profiled "
            f"(+{profiled - unprofiled:.0f} ns)")
    if cuda_only is not None:
        line += f"; CUDA activity only: {cuda_only:.0f} ns (+{cuda_only - unprofiled:.0f} ns)"
    print(line, flush=True)
    results["launch"] = {
        "what": f"CPU ns per y.add_(1) on 32 floats: medians over 5 alternations of the "
                f"median of {max(LAUNCH_ROUNDS // 2, 10)} rounds of {LAUNCHES_PER_ROUND}, "
                f"synchronize between rounds",
        "unprofiled_ns": unprofiled,
        "profiled_cpu_cuda_ns": profiled,
        "profiled_cuda_only_ns": cuda_only,
        "delta_ns": profiled - unprofiled,
    }
    with open(os.path.join(out_dir, "torch_launch.json"), "w") as out:
        json.dump(results, out, indent=1, sort_keys=True)
    faulthandler.cancel_dump_traceback_later()
    print(f"[torch_side] done in {time.monotonic() - _START:.1f} s; files in {out_dir}: "
          + ", ".join(sorted(os.listdir(out_dir))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
