"""The machinery of the params schema: a dataclass built from YAML with
every problem reported at once (unknown keys with the closest valid name,
wrong types with the expected one), numeric ranges, and the hash runs are
keyed by. Imports nothing of rlvr."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass


def settings_hash(*sections) -> str:
    """A short, stable name for a set of settings (dicts, lists, scalars)."""
    blob = json.dumps(sections, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ConfigError(ValueError):
    """All problems found in a params file, one per line."""

    def __init__(self, problems: list[str], source: str = "params"):
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems))


def build(cls, raw, prefix: str, problems: list[str], ignore: tuple[str, ...] = ()):
    """Construct dataclass `cls` from a dict, appending every problem found."""
    if not isinstance(raw, dict):
        problems.append(f"{prefix.rstrip('.') or 'params'}: expected a mapping, got {type(raw).__name__}")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in ignore}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f" (valid: {', '.join(fields)})"
            problems.append(f"unknown key '{where}'{hint}")
            continue
        value = coerce(hints[key], value, where, problems)
        if value is not _BAD:  # a bad value keeps the default, so later checks still run
            kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as e:
        problems.append(f"{prefix or 'params'}: {e}")
        return None


_BAD = object()  # marks a value that failed its type check


def coerce(tp, value, where: str, problems: list[str]):
    """Check `value` against type hint `tp`; returns the (converted) value or _BAD."""
    if dataclasses.is_dataclass(tp):
        built = build(tp, value, f"{where}.", problems)
        return _BAD if built is None else built
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        # `str | Entry`: a name, or a mapping that builds the entry
        chosen = next((a for a in inner if dataclasses.is_dataclass(a) and isinstance(value, dict)),
                      next((a for a in inner if a in (int, str, bool, float) and isinstance(value, a)), inner[0]))
        return coerce(chosen, value, where, problems)
    if origin is list:
        if not isinstance(value, list):
            problems.append(f"'{where}' must be a list, got {value!r}")
            return _BAD
        items = [coerce(args[0], v, f"{where}[{i}]", problems) for i, v in enumerate(value)]
        return _BAD if any(i is _BAD for i in items) else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"'{where}' must be a mapping, got {value!r}")
            return _BAD
        items = {k: coerce(args[1], v, f"{where}.{k}", problems) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in items.values()) else items
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp in (int, str, bool, float):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            problems.append(f"'{where}' must be {tp.__name__}, got {type(value).__name__} {value!r}")
            return _BAD
        return value
    return value


def unknown_name(where: str, name, valid, what: str = "name") -> str:
    close = difflib.get_close_matches(str(name), list(map(str, valid)), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"'{where}' has unknown {what} '{name}'{hint}; valid: {', '.join(map(str, valid))}"


@dataclass(frozen=True)
class Range:
    """The values a numeric setting may take: a finite number in [low, high],
    either end open or unbounded."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        low, high = f"{self.low:g}", f"{self.high:g}"
        if math.isfinite(self.low) and math.isfinite(self.high):
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if math.isfinite(self.low):
            return f"{'>' if self.low_open else '>='} {low}"
        if math.isfinite(self.high):
            return f"{'<' if self.high_open else '<='} {high}"
        return "a finite number"

    def outside(self, integer: bool = False):
        """A value the range refuses (the tests plant it)."""
        if math.isfinite(self.low):
            return self.low - 1 if integer or not self.low_open else self.low
        if math.isfinite(self.high):
            return self.high + 1 if integer or not self.high_open else self.high
        return math.nan


ANY = Range()
AT_LEAST_0, AT_LEAST_1, POSITIVE = Range(0), Range(1), Range(0, low_open=True)
FRACTION = Range(0, 1, low_open=True)  # (0, 1]: a top-p, a share of tokens
OPEN_FRACTION = Range(0, 1, low_open=True, high_open=True)  # (0, 1)


def section_ranges(cls, prefix: str = "", skip: tuple[str, ...] = ()) -> dict[str, Range]:
    """Every range a dataclass and the sections nested in it keep (`ranges`), keyed by dotted path."""
    out = {f"{prefix}{key}": r for key, r in getattr(cls, "ranges", {}).items()}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in skip and dataclasses.is_dataclass(hints[f.name]):
            out.update(section_ranges(hints[f.name], f"{prefix}{f.name}."))
    return out


def check_ranges(obj, ranges: dict[str, Range], problems: list[str], where=lambda key: key) -> None:
    """Every setting of `obj` that `ranges` names ("a.b" reaches a nested
    section) inside its range, each element of a list or mapping too; None is
    a setting left unset. `where(key)`: the key as the user wrote it."""
    for key, allowed in ranges.items():
        value = obj
        for part in key.split("."):
            value = getattr(value, part)
        values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        if any(v is not None and v not in allowed for v in values):
            problems.append(f"'{where(key)}' must be {allowed}, got {value!r}")


def numeric_settings(cls, prefix: str = "") -> dict[str, type]:
    """Every int or float setting of dataclass `cls` ("a.b" in nested
    sections; optional ones, lists and mappings of numbers included), by its
    dotted name: what a table of ranges must cover."""
    out, hints = {}, typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out.update(numeric_settings(tp, f"{prefix}{f.name}."))
            continue
        args = [a for a in (typing.get_args(tp) or (tp,)) if a is not type(None)]
        inner = args[-1] if typing.get_origin(tp) in (list, dict) else args[0]
        if inner in (int, float):
            out[f"{prefix}{f.name}"] = inner
    return out
