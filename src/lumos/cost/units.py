"""Human units for sizes, bandwidths and durations, as users write them in flags and TOML files.

One parser per quantity, each returning lumos's internal unit (bytes, bytes per second, integer
nanoseconds) and raising :class:`~lumos.errors.ConfigError` with the bad text on anything else.

* sizes: ``B``, decimal ``KB MB GB TB`` (10^3...) and binary ``KiB MiB GiB TiB`` (2^10...);
* bandwidths: a size per second, in bytes (``50GB/s``, ``50GiB/s``) or bits (``400Gb/s``,
  ``400Gbps``); a lower-case ``b`` is a bit, an upper-case ``B`` a byte;
* durations: ``ns``, ``us`` (or ``µs``), ``ms``, ``s``;
* a bare number is the internal unit (bytes, bytes/s, ns).

``binary_prefixes=True`` reads the plain prefixes ``K M G T`` as powers of 2 (1 GB = 2^30 bytes):
that is how ASTRA-sim's analytical network backend reads the ``bandwidth`` of its network
config (``bw_GBps_to_Bpns``: GB/s x 2^30 / 10^9 = bytes/ns). ``KiB``-style prefixes are always
binary.

>>> parse_size("1MiB"), parse_size("64KB"), parse_size("4096")
(1048576, 64000, 4096)
>>> parse_bandwidth("400Gb/s"), parse_bandwidth("50GB/s")
(50000000000.0, 50000000000.0)
>>> parse_bandwidth("50GB/s", binary_prefixes=True)
53687091200.0
>>> parse_duration("500ns"), parse_duration("2us"), parse_duration("1.5ms")
(500, 2000, 1500000)
"""

from __future__ import annotations

import re

from lumos.errors import ConfigError

__all__ = ["parse_bandwidth", "parse_duration", "parse_size"]

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
_PREFIX = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4}
_SIZE_RE = re.compile(rf"^{_NUMBER}\s*(?:(?P<prefix>[kKMGT]?)(?P<binary>i?)(?P<unit>[bB]))?$")
_BW_RE = re.compile(
    rf"^{_NUMBER}\s*(?:(?P<prefix>[kKMGT]?)(?P<binary>i?)"
    r"(?P<unit>B/s|b/s|Bps|bps|B/sec|b/sec))?$"
)
_DURATION_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
_DURATION_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>ns|us|µs|μs|ms|s)?$")


def _multiplier(prefix: str, binary: str, binary_prefixes: bool) -> float:
    power = _PREFIX[prefix]
    return float(1 << (10 * power)) if (binary or binary_prefixes) else 10.0 ** (3 * power)


def parse_size(text: str | int) -> int:
    """Bytes in ``text`` (``"1MiB"``, ``"64KB"``, ``"512"``); a whole, non-negative number."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ConfigError(f"size {text} is negative")
        return text
    m = _SIZE_RE.match(str(text).strip())
    if m is None or (m["unit"] == "b"):
        raise ConfigError(f"{text!r} is not a size (e.g. 1MiB, 64KB, 4096)")
    value = float(m["num"]) * _multiplier(m["prefix"] or "", m["binary"] or "", False)
    if value != int(value):
        raise ConfigError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_bandwidth(text: str | float, *, binary_prefixes: bool = False) -> float:
    """Bytes per second in ``text`` (``"50GB/s"``, ``"400Gb/s"``, ``"25e9"``); positive."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _BW_RE.match(str(text).strip())
        if m is None:
            raise ConfigError(f"{text!r} is not a bandwidth (e.g. 50GB/s, 400Gb/s, 25GiB/s)")
        value = float(m["num"]) * _multiplier(m["prefix"] or "", m["binary"] or "",
                                              binary_prefixes)  # fmt: skip
        if m["unit"] and m["unit"][0] == "b":
            value /= 8.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"bandwidth {text!r} must be positive and finite")
    return value


def parse_duration(text: str | int) -> int:
    """Integer nanoseconds in ``text`` (``"500ns"``, ``"2us"``, ``"1ms"``); non-negative."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _DURATION_RE.match(str(text).strip())
        if m is None:
            raise ConfigError(f"{text!r} is not a duration (e.g. 500ns, 2us, 1ms)")
        value = float(m["num"]) * _DURATION_NS[m["unit"] or "ns"]
    if value < 0 or value == float("inf"):
        raise ConfigError(f"duration {text!r} must be non-negative and finite")
    return round(value)
