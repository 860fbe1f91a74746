"""The words users read: machine keys (snake_case, units in names) turned into labels.

One style everywhere a person reads a name (the HTML report's tables and charts, ``lumos
replay``'s table): lower-case words separated by spaces, acronyms in capitals, and the unit the
value is *shown* in as a trailing word (``exposed compute ms``, ``algbw GB/s``). Machine keys in
JSON and CSV stay as they are (``exposed_compute_ns``); this module only reads them.

=======================  ======================  ============================================
key                      label                   why
=======================  ======================  ============================================
``exposed_compute_ns``   ``exposed compute ms``  ``*_ns`` values are shown in ms
``algbw_gb_per_s``       ``algbw GB/s``          the unit spelled as people write it
``tflops``               ``TFLOPS``              a unit on its own
``cpu_op``               ``CPU op``              a task kind (:func:`kind_label`)
=======================  ======================  ============================================
"""

from __future__ import annotations

__all__ = ["BREAKDOWN_LABELS", "column_label", "kind_label"]

#: The four parts of a step's GPU time, key -> label, in the order every view shows them.
BREAKDOWN_LABELS: dict[str, str] = {
    "exposed_compute_ns": "exposed compute",
    "overlapped_ns": "overlapped",
    "exposed_comm_ns": "exposed comm",
    "other_ns": "other",
}

# Key suffix -> unit word of the shown value; the first that matches wins.
_UNIT_SUFFIXES = (("_gb_per_s", "GB/s"), ("_ns", "ms"), ("_bytes", "bytes"))
_WORDS = {"tflops": "TFLOPS", "gb_per_s": "GB/s", "cpu": "CPU", "gpu": "GPU", "sm": "SM"}


def _words(key: str) -> str:
    return " ".join(_WORDS.get(w, w) for w in key.split("_") if w)


def column_label(key: str) -> str:
    """The header of a column holding ``key``'s values as the report shows them.

    >>> [column_label(k) for k in ("exposed_comm_ns", "algbw_gb_per_s", "size_bytes", "tflops")]
    ['exposed comm ms', 'algbw GB/s', 'size bytes', 'TFLOPS']
    >>> [column_label(k) for k in ("mean_gpu_ns", "task_ns", "times_last", "")]
    ['mean GPU ms', 'task ms', 'times last', '']
    """
    if key in _WORDS:
        return _WORDS[key]
    for suffix, unit in _UNIT_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return f"{_words(key.removesuffix(suffix))} {unit}"
    return _words(key)


def kind_label(kind: str) -> str:
    """A task kind (or critical-path cause) as a label: ``cpu_op`` -> ``CPU op``.

    >>> [kind_label(k) for k in ("cpu_op", "cpu_comm", "runtime", "delay")]
    ['CPU op', 'CPU comm', 'runtime', 'delay']
    """
    return _words(kind)
