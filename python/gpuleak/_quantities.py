"""Byte counts as people read them, and sizes as people write them ("1 MiB", "512 kB")."""

import re

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def format_bytes(count):
    """1536 -> '1.5 KiB'; binary units, as nvidia-smi and PyTorch print them."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%.1f GiB" % value


def parse_size(text):
    """'1 MiB' -> 1048576; an int is bytes. Raises ValueError with the reason."""
    if isinstance(text, bool):
        raise ValueError("%r is not a size" % (text,))
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative (%d)" % text)
        return text
    found = _SIZE.match(str(text))
    if not found or found.group(2).lower() not in _UNITS:
        raise ValueError(
            '%r is not a size: write a number and a unit, such as "1 MiB", ' '"512 kB" or "2 GiB"' % (text,)
        )
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])
