"""Plain JSON values in and out of google.protobuf.Struct.

Rules that hold:
- Only what JSON carries is sent: dicts with str keys, lists and tuples,
  str, bool, None, finite floats and ints within 2**53 (a larger int would
  round to another number as a double, and the guard would hash, and a
  backend execute, what the caller never said). Anything else raises
  YesguardInputError before a request leaves.
- What comes back is plain: a number that is integral (and within 2**53)
  is an int, as JSON readers in other languages would read it, so a
  duplicate's original result reads as the tool returned it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping

from google.protobuf import struct_pb2

JsonObject = Dict[str, Any]

_MAX_SAFE = 2**53


class YesguardInputError(ValueError):
    """An argument the guard would refuse, or that would not mean what it says."""


def _check(value: Any, where: str, depth: int = 0) -> Any:
    if depth > 64:
        raise YesguardInputError(f"{where}: nested more than 64 deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE:
            raise YesguardInputError(f"{where}: {value} is beyond 2**53: as a JSON number it would round; send it as a string")
        return float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise YesguardInputError(f"{where}: {value} is not a JSON number")
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise YesguardInputError(f"{where}: key {k!r} is not a string")
            out[k] = _check(v, f"{where}.{k}", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_check(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise YesguardInputError(f"{where}: a {type(value).__name__} is not a JSON value")


def to_struct(obj: Mapping[str, Any] | None, where: str) -> struct_pb2.Struct | None:
    """obj as a Struct; None stays None (the guard then records {})."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise YesguardInputError(f"{where}: want a dict (a JSON object), got a {type(obj).__name__}")
    s = struct_pb2.Struct()
    s.update(_check(obj, where))
    return s


def _plain(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(v.struct_value)
    if kind == "list_value":
        return [_plain(x) for x in v.list_value.values]
    if kind == "number_value":
        n = v.number_value
        if math.isfinite(n) and n == int(n) and abs(n) <= _MAX_SAFE and not (n == 0 and math.copysign(1, n) < 0):
            return int(n)
        return n
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    return None


def from_struct(s: struct_pb2.Struct) -> JsonObject:
    """s as a plain dict."""
    return {k: _plain(v) for k, v in s.fields.items()}
