"""Per-call cost of opscope's Python ranges: RecordFunctionFast and record_function.

Each is timed as a `with` statement in a loop, with no session and with a session recording
(no lenses), next to the same loop over an empty `with` on a trivial context manager (a
Python class whose __enter__ and __exit__ do nothing), in the same run. The variants run
interleaved, each repeat a fresh loop of --calls iterations, and the medians over the repeats
are printed, per call, in nanoseconds, with what each adds over the trivial `with`. The loop's
own cost (an empty `for` body) is subtracted from every figure. Times are the thread's CPU
time (time.thread_time_ns), so that other processes on a busy machine do not count.

Run with the built package on the path (Debian's interpreter):

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py          # ~20 s
    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --quick  # smoke test, ~1 s

Targets (issue 7): <= 300 ns per range with a session active, <= 60 ns added with none.

Then the with_stack lens through each of the frame walks the interpreter has (the public API
on every version, and CPython 3.11's internal frame list), the range begun in the loop's own
frame and in a function called per iteration.

Then Python allocations under profile_memory (issue 17): a loop that makes and drops one
object per iteration (one allocation and one free through the interpreter's object
allocator), with no session, with a session that does not profile memory, and with one that
does; the last two minus the first are what opscope adds (target <= 100 ns per allocation
recorded, nothing measurable when memory is not profiled).

Then the flight recorder (issue 39): the same ranges with an always-on
opscope.profiler.flight_recorder recording (a 64 MiB ring that wraps around during the run)
against inside a profile window, in one run: during the ring's first pass (a fresh recorder
per repeat, whose pages are touched for the first time) and once it has wrapped (every page
touched before, as in a program that has run a while).
"""

import argparse
import gc
import statistics
import sys
import time

import opscope._C as _C

try:
    from opscope.profiler import RecordFunctionFast
except ImportError:  # the package's Python side not built yet: the native type is the same
    RecordFunctionFast = _C.RecordFunctionFast
try:
    from opscope.profiler import record_function
except ImportError:
    record_function = None


class Trivial:
    """The baseline: the cheapest context manager Python code can write."""

    def __enter__(self):
        return None

    def __exit__(self, *args):
        return None


def loop_empty(n):
    for _ in range(n):
        pass


def loop_trivial_with(n):
    cm = Trivial()
    for _ in range(n):
        with cm:
            pass


def loop_rff(n):
    # As it is written in practice: a new object per use.
    for _ in range(n):
        with RecordFunctionFast("bench::rff"):
            pass


def loop_rff_reused(n):
    rf = RecordFunctionFast("bench::rff_reused")
    for _ in range(n):
        with rf:
            pass


def loop_rff_inputs(n):
    # With inputs: converted only when the session records shapes (this bench's doesn't).
    args = [[32, 64], 1.0]
    for _ in range(n):
        with RecordFunctionFast("bench::rff_inputs", args):
            pass


def range_in_a_new_frame():
    with RecordFunctionFast("bench::rff_called"):
        pass


def loop_rff_called(n):
    # Each range begun in a frame that did not exist a moment before: what the public frame
    # walk pays most for (from 3.11 it makes that frame's frame object).
    for _ in range(n):
        range_in_a_new_frame()


def loop_alloc(n):
    for _ in range(n):
        object()


def loop_record_function(n):
    for _ in range(n):
        with record_function("bench::record_function"):
            pass


VARIANTS = [
    ("trivial with (baseline)", loop_trivial_with),
    ("RecordFunctionFast(name)", loop_rff),
    ("RecordFunctionFast reused", loop_rff_reused),
    ("RecordFunctionFast(name, inputs)", loop_rff_inputs),
]
if record_function is not None:
    VARIANTS.append(("record_function(name)", loop_record_function))


class Session:
    """A session recording every thread with the given lenses (none by default):
    opscope.profiler.profile when the Python side exists, else the native profiler it wraps."""

    def __init__(self, **lenses):
        self.lenses = lenses

    def __enter__(self):
        try:
            from opscope.profiler import profile
        except ImportError:
            profile = None
        if profile is not None:
            self.p = profile(**self.lenses)
            self.p.__enter__()
            self.stop = lambda: self.p.__exit__(None, None, None)
        else:
            self.p = _C.Profiler(activities=[_C.ProfilerActivity.CPU], **self.lenses)
            self.p.start()
            self.stop = self.p.stop
        return self

    def __exit__(self, *args):
        self.stop()


class Recorder:
    """A flight recorder with the package's defaults (64 MiB ring, keep 60 s), no lenses."""

    def __enter__(self):
        from opscope.profiler import flight_recorder

        self.r = flight_recorder(dump_on_exception=False)
        return self

    def __exit__(self, *args):
        self.r.stop()


def time_once(fn, calls):
    # The thread's CPU time, not the wall clock: on a shared machine the time this thread
    # spends descheduled is others' work, not the cost of a range.
    t0 = time.thread_time_ns()
    fn(calls)
    return (time.thread_time_ns() - t0) / calls


def measure(calls, repeats, active, **lenses):
    """Median ns per call of each variant, loop overhead subtracted."""
    samples = {name: [] for name, _ in VARIANTS}
    empty = []
    for _ in range(repeats):
        # A fresh session per repeat keeps its buffer small (each range is 32 bytes).
        session = Session(**lenses) if active else None
        if session is not None:
            session.__enter__()
        try:
            empty.append(time_once(loop_empty, calls))
            for name, fn in VARIANTS:
                samples[name].append(time_once(fn, calls))
        finally:
            if session is not None:
                session.__exit__(None, None, None)
    overhead = statistics.median(empty)
    return {name: statistics.median(v) - overhead for name, v in samples.items()}, overhead


def measure_allocations(calls, repeats):
    """Median ns per allocation-and-free of loop_alloc: no session, a session without
    profile_memory, a session with it; interleaved, loop overhead subtracted."""
    states = {"no session": None, "session, profile_memory=False": {},
              "session, profile_memory=True": {"profile_memory": True}}
    samples = {name: [] for name in states}
    empty = []
    for _ in range(repeats):
        for name, lenses in states.items():
            session = Session(**lenses) if lenses is not None else None
            if session is not None:
                session.__enter__()
            try:
                if name == "no session":
                    empty.append(time_once(loop_empty, calls))
                samples[name].append(time_once(loop_alloc, calls))
            finally:
                if session is not None:
                    session.__exit__(None, None, None)
    overhead = statistics.median(empty)
    return {name: statistics.median(v) - overhead for name, v in samples.items()}, overhead


def measure_walks(calls, repeats):
    """Median ns per range with with_stack through each frame walk this interpreter has
    (python/src/python_frames.cpp), interleaved in one session per repeat; the cost of a
    range without a session (the same loops) subtracted."""
    walks = ["internal", "public"] if _C._frame_walk() == "internal" else ["public"]
    loops = [("range in the loop's frame", loop_rff),
             ("range in a new frame per call", loop_rff_called)]
    samples = {(w, name): [] for w in walks for name, _ in loops}
    bare = {name: [] for name, _ in loops}
    before = _C._frame_walk()
    try:
        for _ in range(repeats):
            for name, fn in loops:
                bare[name].append(time_once(fn, calls))
            with Session(with_stack=True):
                for w in walks:
                    _C._frame_walk(w)
                    for name, fn in loops:
                        samples[(w, name)].append(time_once(fn, calls))
    finally:
        _C._frame_walk(before)
    return {key: statistics.median(v) - statistics.median(bare[key[1]])
            for key, v in samples.items()}


def fill_until_wrapped(recorder):
    """Records ranges until the recorder's ring has reused chunks: as in a program that has
    run for a while. Its 64 MiB hold 4.19 M one-slot ranges; 5 M are recorded (a dump to check
    would write and parse 700 MB of JSON)."""
    loop_record_function(5_000_000)


def measure_flight(calls, repeats):
    """Median ns per call of the range variants inside a profile window and with a flight
    recorder recording (64 MiB), loop overhead subtracted: a fresh recorder per repeat (its
    ring's first pass, each page touched for the first time) interleaved with a window; then
    one recorder whose ring has wrapped (every page touched before), interleaved with windows
    that pause it."""
    kinds = ["profile window", "flight recorder, first pass", "flight recorder, wrapped"]
    samples = {(kind, name): [] for kind in kinds for name, _ in VARIANTS}
    empty = []

    def sample(kind):
        empty.append(time_once(loop_empty, calls))
        for name, fn in VARIANTS:
            samples[(kind, name)].append(time_once(fn, calls))

    for _ in range(repeats):
        with Session():
            sample("profile window")
        with Recorder():
            sample("flight recorder, first pass")
    with Recorder() as recorder:
        fill_until_wrapped(recorder.r)
        for _ in range(repeats):
            with Session():
                sample("profile window")
            sample("flight recorder, wrapped")
    overhead = statistics.median(empty)
    return {key: statistics.median(v) - overhead for key, v in samples.items()}, overhead


def report(title, medians, overhead):
    base = medians["trivial with (baseline)"]
    print(f"\n{title}  (loop overhead {overhead:.1f} ns/iteration, subtracted)")
    print(f"  {'variant':36s} {'ns/call':>9s} {'added vs trivial with':>22s} {'ratio':>7s}")
    for name, ns in medians.items():
        added = ns - base
        print(f"  {name:36s} {ns:9.1f} {added:+22.1f} {ns / base:7.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200_000, help="iterations per loop")
    parser.add_argument("--repeats", type=int, default=15, help="loops per variant (median)")
    parser.add_argument("--quick", action="store_true", help="a smoke test: few short loops")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeats = 20_000, 3

    gc.disable()  # a collection inside one loop would be its outlier
    print(f"python {sys.version.split()[0]}, {args.calls} calls per loop, "
          f"median of {args.repeats} loops")
    inactive, overhead_inactive = measure(args.calls, args.repeats, active=False)
    active, overhead_active = measure(args.calls, args.repeats, active=True)
    stacks, overhead_stacks = measure(args.calls, args.repeats, active=True, with_stack=True)
    report("No session", inactive, overhead_inactive)
    report("Session active (no lenses)", active, overhead_active)
    report("Session with with_stack (5 Python frames deep)", stacks,
           overhead_stacks)

    rff_idle = inactive["RecordFunctionFast(name)"] - inactive["trivial with (baseline)"]
    rff_active = active["RecordFunctionFast(name)"]
    print(f"\nRecordFunctionFast: {rff_active:.0f} ns per range with a session (target <= 300), "
          f"{rff_idle:+.0f} ns over a trivial with without one (target <= +60)")
    if record_function is not None:
        rf_idle = inactive["record_function(name)"] - inactive["trivial with (baseline)"]
        print(f"record_function: {active['record_function(name)']:.0f} ns per range with a "
              f"session, {rf_idle:+.0f} ns over a trivial with without one")

    walks = measure_walks(args.calls, args.repeats)
    print("\nwith_stack through each frame walk: ns a recorded range adds over the same loop "
          "without a session")
    for (walk, name), ns in walks.items():
        print(f"  {walk:9s} {name:36s} {ns:9.1f}")

    try:
        from opscope.profiler import flight_recorder  # noqa: F401
    except ImportError:
        flight = None
    else:
        flight, overhead_flight = measure_flight(args.calls, args.repeats)
    if flight is not None:
        print(f"\nFlight recorder against a profile window  (loop overhead {overhead_flight:.1f} "
              f"ns/iteration, subtracted)")
        print(f"  {'variant':36s} {'window':>8s} {'first pass':>11s} {'wrapped':>8s}  "
              f"(ns per call; ratio to the window)")
        for name, _ in VARIANTS:
            window = flight[("profile window", name)]
            first = flight[("flight recorder, first pass", name)]
            wrapped = flight[("flight recorder, wrapped", name)]
            print(f"  {name:36s} {window:8.1f} {first:11.1f} {wrapped:8.1f}  "
                  f"({first / window:.2f}, {wrapped / window:.2f})")

    allocs, overhead_allocs = measure_allocations(args.calls, args.repeats)
    print(f"\nPython allocations: object() made and dropped  (loop overhead "
          f"{overhead_allocs:.1f} ns/iteration, subtracted)")
    base = allocs["no session"]
    for name, ns in allocs.items():
        print(f"  {name:36s} {ns:9.1f} ns per allocation and free  {ns - base:+8.1f}")
    added = allocs["session, profile_memory=True"] - base
    idle = allocs["session, profile_memory=False"] - base
    print(f"profile_memory: {added / 2:.0f} ns added per allocation or free recorded "
          f"(target <= 100), {idle:+.1f} ns per pair without profile_memory")


if __name__ == "__main__":
    main()
