"""The C API capsule: what an extension's C++ threads use to record into the session."""

import ctypes
import os
import threading

import opscope
import opscope._C as _C
import opscope.profiler as profiler

RangeBegin = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
RangeEnd = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class OpscopeCApi(ctypes.Structure):
    # python/include/opscope/python_capi.h, version 1.
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("range_begin", RangeBegin),
        ("range_end", RangeEnd),
    ]


def api():
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(_C._C_API, b"opscope._C._C_API")
    return OpscopeCApi.from_address(address)


def test_capsule_layout():
    a = api()
    assert a.version == 1
    assert a.size == ctypes.sizeof(OpscopeCApi)


def test_header_is_found_by_get_include():
    assert os.path.isfile(os.path.join(opscope.get_include(), "opscope", "python_capi.h"))


def test_ranges_through_the_capsule_land_in_the_session():
    a = api()
    # No session: nothing is allocated, NULL comes back.
    assert a.range_begin(b"nothing", 7, 7) is None
    a.range_end(None)  # allowed

    tids = []

    def worker():
        tids.append(threading.get_native_id())
        outer = a.range_begin(b"capi_outer", 10, 7)
        inner = a.range_begin(b"capi_inner_and_more", 10, 0)  # name_len cuts the name
        a.range_end(inner)
        a.range_end(outer)

    with profiler.profile() as p:
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    outers = [e for e in p.events() if e.name == "capi_outer"]
    assert sorted(e.thread for e in outers) == sorted(tids)
    for outer in outers:
        assert outer.scope_name == "USER_SCOPE"
        assert [(c.name, c.scope_name) for c in outer.cpu_children] == [("capi_inner", "FUNCTION")]
