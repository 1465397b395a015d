"""The machinery of the params schema: a dataclass built from YAML with
every problem reported at once (unknown keys with the closest valid name,
wrong types with the expected one), and the hash runs are keyed by. Imports
nothing of rlvr."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing


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
        return coerce(inner[0], value, where, problems)
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
