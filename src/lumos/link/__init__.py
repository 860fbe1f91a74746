"""Link stage: ET host ops <-> Kineto events, runtime calls <-> GPU activities.

``link(host, kineto) -> LinkedTrace`` (see :mod:`lumos.link.et_kineto`), its per-rank
:class:`LinkReport`, the Kineto-only :func:`attach_host_device`, and :func:`merge_host_device`
(the merged host+device ET that ``chakra_trace_link`` writes).
"""

from lumos.link.et_kineto import METHOD_NAMES, LinkedTrace, link
from lumos.link.host_device import LAUNCH_APIS, HostDevice, attach_host_device
from lumos.link.merge import MergeSummary, merge_host_device
from lumos.link.report import LinkReport, ThreadPair, format_reports

__all__ = [
    "LAUNCH_APIS",
    "METHOD_NAMES",
    "HostDevice",
    "LinkReport",
    "LinkedTrace",
    "MergeSummary",
    "ThreadPair",
    "attach_host_device",
    "format_reports",
    "link",
    "merge_host_device",
]
