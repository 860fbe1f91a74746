# What lumos.ingest.kineto_scan calls in C: the JSON primitives and span interning.
from lumos._intern cimport intern_span
from lumos.ingest.json_scan cimport (
    after_member,
    as_float,
    as_int,
    member,
    skip_value,
    string_end,
    whitespace_end,
)
