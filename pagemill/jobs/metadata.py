"""The caller's `metadata`: a JSON object the job keeps and returns.

Only what every part of the path can hold is accepted. JSON as Python reads it
allows more than Postgres' jsonb, pydantic's serializer and other clients do:
NaN and Infinity, numbers that overflow a float (1e999) or exceed Python's 4,300
digit conversion limit, the NUL character, lone UTF-16 surrogates, and nesting
deep enough to exhaust a recursive parser or serializer.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pagemill.domain import InputRejected

MAX_METADATA_BYTES = 16 * 1024
# Far more than any real label needs; pydantic's serializer fails near 255 levels
# and Python's json near 1,000.
MAX_METADATA_DEPTH = 32
# Integers a signed 64-bit value holds, what most languages and databases read
# exactly; larger ones belong in strings.
MAX_METADATA_INT = 2**63 - 1
_MAX_INT_DIGITS = len(str(MAX_METADATA_INT))


class MetadataRejected(InputRejected):
    def __init__(self, message: str) -> None:
        super().__init__("invalid_metadata", message)


def parse_metadata(raw: str | None) -> dict[str, Any]:
    """The metadata form field as a dict, or MetadataRejected saying what is wrong."""
    if raw is None or not raw.strip():
        return {}
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise MetadataRejected("The metadata field must be under 16 KiB.")
    # Before parsing: json's parser recurses once per level.
    _check_depth(_nesting_depth(raw))
    try:
        value = json.loads(
            raw, parse_constant=_refuse_constant, parse_int=_bounded_int, parse_float=_finite_float
        )
    except json.JSONDecodeError as error:
        raise MetadataRejected(f"The metadata field is not valid JSON: {error.msg}.") from None
    if not isinstance(value, dict):
        raise MetadataRejected("The metadata field must be a JSON object.")
    check_metadata(value, limit_integers=True)
    return value


def check_metadata(value: Any, limit_integers: bool) -> None:
    """Raise MetadataRejected unless every level of `value` can be stored and returned.

    Integers are held to 64 bits only as sent: jsonb keeps numbers as decimals, so a
    float like 1e20 comes back from the database as the integer it equals."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            _check_depth(depth)
            for key, child in item.items():
                _check_string(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            _check_depth(depth)
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _check_string(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if limit_integers:
                _check_int(item)
        elif isinstance(item, float):
            _finite_float(repr(item))
        else:
            raise MetadataRejected(f"The metadata holds a {type(item).__name__}, not JSON.")


def renderable_metadata(value: Any) -> dict[str, Any]:
    """Stored metadata as the API returns it: a job stored before today's limits
    existed is shown with empty metadata rather than failing its client's job list."""
    if not isinstance(value, dict):
        return {}
    try:
        check_metadata(value, limit_integers=False)
    except MetadataRejected:
        return {}
    return value


def _nesting_depth(raw: str) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _check_depth(depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise MetadataRejected(
            f"The metadata field is nested {depth} levels deep; the limit is {MAX_METADATA_DEPTH}."
        )


def _check_string(text: str) -> None:
    if "\x00" in text:
        raise MetadataRejected(
            "The metadata field holds a NUL character (\\u0000), which cannot be stored."
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MetadataRejected(
            "The metadata field holds a lone UTF-16 surrogate (\\ud800 to \\udfff), "
            "which is not a character; send the pair or the character itself."
        ) from None


def _refuse_constant(name: str) -> Any:
    raise MetadataRejected(
        f"The metadata field holds {name}, which JSON does not allow; send a number or a string."
    )


def _bounded_int(digits: str) -> int:
    # Checked before int(): converting thousands of digits is slow, then refused.
    if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
        _refuse_huge()
    value = int(digits)
    _check_int(value)
    return value


def _check_int(value: int) -> None:
    if not -MAX_METADATA_INT - 1 <= value <= MAX_METADATA_INT:
        _refuse_huge()


def _refuse_huge() -> None:
    raise MetadataRejected(
        "The metadata field holds an integer too large to keep exactly; integers must "
        "fit in 64 bits (up to 9223372036854775807). Send larger ones as strings."
    )


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise MetadataRejected(
            f"The metadata field holds the number {text[:40]}, which is out of range; "
            "send it as a string."
        )
    return value
