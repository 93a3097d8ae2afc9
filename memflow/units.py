"""Parsing and formatting of physical quantities used in MemFlow configs.

Base units everywhere in MemFlow:

* sizes — **bytes** (``int``);
* bandwidths — **bytes per second** (``float``);
* times — **seconds** (``float``);
* compute rates — **FLOP per second** (``float``).

The ``parse_*`` functions accept a plain number (taken as the base unit) or a
string with a unit (``"16GiB"``, ``"300GB/s"``, ``"25 Gbit/s"``, ``"2us"``,
``"312TFLOPS"``).  Decimal prefixes (k, M, G, T, P) are powers of 1000 and
binary prefixes (Ki, Mi, Gi, Ti, Pi) are powers of 1024.  Anything invalid
raises :class:`~memflow.errors.ConfigError` with a one-line message naming
the value and showing valid examples.
"""
from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any

from memflow.errors import ConfigError

__all__ = [
    "KiB",
    "MiB",
    "GiB",
    "TiB",
    "KB",
    "MB",
    "GB",
    "TB",
    "parse_bytes",
    "parse_bandwidth",
    "parse_time",
    "parse_flops",
    "format_bytes",
    "format_bandwidth",
    "format_time",
    "format_flops",
]

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
_BINARY = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50, "ei": 2.0**60}

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_BYTES_RE = re.compile(_NUM + r"\s*(?P<prefix>[kmgtpe]i?)?(?P<unit>b|bytes?)?$", re.IGNORECASE)
# Bandwidth: the unit's case matters for b (bit) versus B (byte).
_BW_RE = re.compile(
    _NUM + r"\s*(?P<prefix>[kKmMgGtTpP]i?)?(?P<unit>B|b|bytes?|bits?|bit)\s*(?:/\s*s(?:ec)?|ps)$"
)
_TIME_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "min": 60.0,
    "h": 3600.0,
}
_TIME_RE = re.compile(_NUM + r"\s*(?P<unit>ns|us|µs|μs|ms|s|sec|min|h)?$", re.IGNORECASE)
_FLOPS_RE = re.compile(
    _NUM + r"\s*(?P<prefix>[kmgtpe])?(?:(?P<unit>flops|flop/s|flop\s*/\s*s|flops/s)|(?P<bare>))$",
    re.IGNORECASE,
)

_BYTES_EXAMPLES = "e.g. 1000, '512MiB', '12GB', '16GiB', '1.5 TiB'"
_BW_EXAMPLES = "e.g. 12e9, '300GB/s', '16GiB/s', '25 Gbit/s', '100Gbps'"
_TIME_EXAMPLES = "e.g. 0.002, '500ns', '2us', '1.5ms', '3s'"
_FLOPS_EXAMPLES = "e.g. 1e12, '312TFLOPS', '19.5 TFLOP/s', '900 GFLOPS'"


def _what(name: str | None, kind: str) -> str:
    return f"{kind} for {name}" if name else kind


def _check_number(x: Any, name: str | None, kind: str, examples: str, allow_zero: bool, shown: Any = None) -> float:
    shown = x if shown is None else shown
    if isinstance(x, bool) or not isinstance(x, Real):
        raise ConfigError(f"invalid {_what(name, kind)} {x!r}: expected a number or a string with a unit, {examples}")
    f = float(x)
    if math.isnan(f) or math.isinf(f):
        raise ConfigError(f"invalid {_what(name, kind)} {shown!r}: must be finite, {examples}")
    if f < 0 or (f == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise ConfigError(f"invalid {_what(name, kind)} {shown!r}: must be {bound}, {examples}")
    return f


def _prefix_factor(prefix: str | None) -> float:
    if not prefix:
        return 1.0
    p = prefix.lower()
    return _BINARY[p] if p.endswith("i") else _DECIMAL[p]


def _matched(pattern: re.Pattern, v: str, name: str | None, kind: str, expected: str) -> re.Match:
    m = pattern.match(v.strip())
    if not m:
        raise ConfigError(f"invalid {_what(name, kind)} {v!r}: expected {expected}")
    return m


def parse_bytes(v: Any, *, name: str | None = None, allow_zero: bool = True) -> int:
    """Parse a size into **bytes** (``int``).

    Accepts an ``int`` (or integral float) number of bytes or a string such as
    ``"1000"``, ``"512MiB"``, ``"12GB"`` (12·10⁹), ``"16GiB"`` (16·2³⁰) or
    ``"1.5 TiB"``; units are case-insensitive.  Fractional results are rounded
    to the nearest byte.  Negative values, garbage and (with
    ``allow_zero=False``) zero raise :class:`ConfigError`; ``name`` names the
    field in the message.
    """
    kind = "byte size"
    if isinstance(v, str):
        m = _matched(_BYTES_RE, v, name, kind, f"a size {_BYTES_EXAMPLES}")
        prefix = m.group("prefix")
        if prefix and not prefix.lower().endswith("i") and not m.group("unit"):
            # "16G" is ambiguous (16e9 or 16 GiB?): ask for "16GB" or "16GiB".
            raise ConfigError(f"ambiguous {_what(name, kind)} {v!r}: write the unit out, {_BYTES_EXAMPLES}")
        value = float(m.group("num")) * _prefix_factor(prefix)
        _check_number(value, name, kind, _BYTES_EXAMPLES, allow_zero, v)
        if value != 0 and round(value) == 0:
            raise ConfigError(f"invalid {_what(name, kind)} {v!r}: less than one byte, {_BYTES_EXAMPLES}")
        return int(round(value))
    f = _check_number(v, name, kind, _BYTES_EXAMPLES, allow_zero)
    if f != int(f):
        raise ConfigError(f"invalid {_what(name, kind)} {v!r}: a number of bytes must be whole, {_BYTES_EXAMPLES}")
    return int(f)


def parse_bandwidth(v: Any, *, name: str | None = None, allow_zero: bool = False) -> float:
    """Parse a bandwidth into **bytes per second** (``float``).

    ``"300GB/s"`` → 3e11, ``"16GiB/s"`` → 16·2³⁰, ``"25 Gbit/s"`` /
    ``"25Gb/s"`` / ``"25Gbps"`` → 25e9 / 8 (a lowercase ``b`` or ``bit``
    means bits, an uppercase ``B`` or ``byte`` means bytes).  A plain number
    is bytes/s.  Zero is rejected unless ``allow_zero``.
    """
    kind = "bandwidth"
    if isinstance(v, str):
        m = _matched(_BW_RE, v, name, kind, f"a rate {_BW_EXAMPLES}")
        unit = m.group("unit")
        per_unit = 1 / 8 if unit == "b" or unit.lower().startswith("bit") else 1.0
        value = float(m.group("num")) * _prefix_factor(m.group("prefix")) * per_unit
        return _check_number(value, name, kind, _BW_EXAMPLES, allow_zero, v)
    return _check_number(v, name, kind, _BW_EXAMPLES, allow_zero)


def parse_time(v: Any, *, name: str | None = None, allow_zero: bool = True) -> float:
    """Parse a duration into **seconds** (``float``).

    ``"500ns"``, ``"2us"`` (or ``"2µs"``), ``"1.5ms"``, ``"3s"``, ``"2min"``,
    ``"1h"``; a plain number is seconds.  Negative values raise
    :class:`ConfigError`; zero is accepted unless ``allow_zero=False``.
    """
    kind = "time"
    if isinstance(v, str):
        m = _matched(_TIME_RE, v, name, kind, f"a duration {_TIME_EXAMPLES}")
        unit = (m.group("unit") or "s").lower()
        value = float(m.group("num")) * _TIME_UNITS[unit]
        return _check_number(value, name, kind, _TIME_EXAMPLES, allow_zero, v)
    return _check_number(v, name, kind, _TIME_EXAMPLES, allow_zero)


def parse_flops(v: Any, *, name: str | None = None, allow_zero: bool = False) -> float:
    """Parse a compute rate into **FLOP per second** (``float``).

    ``"312TFLOPS"``, ``"19.5 TFLOP/s"``, ``"900 GFLOPS"``, ``"1e12"`` or a
    plain number (FLOP/s).  Prefixes are decimal (k, M, G, T, P, E).  Zero is
    rejected unless ``allow_zero``.
    """
    kind = "compute rate"
    if isinstance(v, str):
        m = _FLOPS_RE.match(v.strip())
        if not m or (m.group("bare") is not None and m.group("prefix")):
            # "312T" without FLOPS is ambiguous enough to reject.
            raise ConfigError(f"invalid {_what(name, kind)} {v!r}: expected a rate {_FLOPS_EXAMPLES}")
        value = float(m.group("num")) * _prefix_factor(m.group("prefix"))
        return _check_number(value, name, kind, _FLOPS_EXAMPLES, allow_zero, v)
    return _check_number(v, name, kind, _FLOPS_EXAMPLES, allow_zero)


def _scaled(x: float, steps: list[tuple[float, str]], digits: int = 1) -> str:
    sign = "-" if x < 0 else ""
    a = abs(x)
    if not math.isfinite(a):
        return f"{x} {steps[-1][1]}"
    for factor, unit in steps:
        if a >= factor:
            return f"{sign}{a / factor:.{digits}f} {unit}"
    factor, unit = steps[-1]
    return f"{sign}{a / factor:.{digits}f} {unit}"


def format_bytes(n: float) -> str:
    """Format a size in **bytes** with binary units: ``"512 B"``, ``"11.2 GiB"``."""
    a = abs(n)
    if a < KiB:
        return f"{int(n)} B" if float(n).is_integer() else f"{n:.1f} B"
    return _scaled(n, [(2.0**50, "PiB"), (2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB")])


def format_bandwidth(bps: float) -> str:
    """Format a bandwidth in **bytes/s** with decimal units: ``"12.0 GB/s"``."""
    return _scaled(bps, [(1e15, "PB/s"), (1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")])


def format_time(s: float) -> str:
    """Format a duration in **seconds**: ``"12.3 ms"``, ``"1.5 s"``, ``"2.0 us"``."""
    if s == 0 or not math.isfinite(s):
        return f"{s:g} s"
    return _scaled(s, [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")])


def format_flops(f: float) -> str:
    """Format a compute rate in **FLOP/s** with decimal units: ``"312.0 TFLOP/s"``."""
    return _scaled(
        f,
        [(1e18, "EFLOP/s"), (1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")],
    )
