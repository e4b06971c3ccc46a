"""A pytest plugin that runs HTA's own test suite against opscope.

Loaded with ``-p opscope_hta_plugin`` (this folder on PYTHONPATH, with opscope's package and
HTA's), it does what an HTA user does when switching to opscope, before any test module is
collected: ``hta.trace_analysis.TraceAnalysis`` and ``hta.trace_diff.TraceDiff`` become
opscope's, and so do the public names of HTA's critical-path module that opscope provides
(``CPGraph``, ``CPNode``, ``CPEdge``, ``CPEdgeType``, ``BoundType``, ``CriticalPathAnalysis``,
``restore_cpgraph``): a test's ``from hta.trace_analysis import TraceAnalysis`` then gets
opscope's class. No test is edited.

``OPSCOPE_HTA_PEER=hta`` leaves HTA's classes in place: the same runner then measures HTA.
"""

import os

# HTA's module -> the names opscope.analysis provides in its place.
SWAPPED = {
    "hta.trace_analysis": ("TraceAnalysis",),
    # Not LabeledTrace: HTA's documentation hands HTA's own LabeledTrace to TraceDiff, and
    # opscope's TraceDiff must take it (opscope.analysis.LabeledTrace has python/tests).
    "hta.trace_diff": ("TraceDiff",),
    "hta.analyzers.critical_path_analysis": (
        "CPGraph", "CPNode", "CPEdge", "CPEdgeType", "BoundType", "CriticalPathAnalysis",
        "restore_cpgraph",
    ),
}


def pytest_configure(config):
    if os.environ.get("OPSCOPE_HTA_PEER", "opscope") == "hta":
        return
    import importlib

    import opscope.analysis

    for module_name, names in SWAPPED.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(opscope.analysis, name):
                setattr(module, name, getattr(opscope.analysis, name))
