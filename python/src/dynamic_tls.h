// Force-included (-include) into every file of opscope_python and of its copy of the library:
// turns opscope's initial-exec thread_locals into global-dynamic ones.
//
// Why: the library reaches its per-thread buffer cursor through initial-exec TLS (one
// %fs-relative load on the hot path). A shared object with any initial-exec TLS needs its
// whole TLS block (about 4 KB for opscope, most of it the module-path cache) in the static TLS
// surplus that glibc reserves at start-up for dlopen'ed libraries, which is a few hundred
// bytes: `import opscope` then fails with "cannot allocate memory in static TLS block".
// Global-dynamic TLS is allocated per thread on first use instead; it costs a
// __tls_get_addr call per access, invisible next to a Python call.
//
// The attribute is spelled tls_model("initial-exec") in the library's sources; a
// function-like macro of the same name rewrites its argument (a macro does not expand
// itself again, so the result stays the attribute). Nothing else in the sources or in the
// system headers uses that name.
#pragma once
#define tls_model(model) tls_model("global-dynamic")
