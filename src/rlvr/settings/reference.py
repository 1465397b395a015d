"""The settings reference, written from the dataclasses that define the
settings and the comments beside their fields, so the two cannot disagree:

    rlvr settings > docs/settings.md

(tests/settings/test_settings_reference.py checks that docs/settings.md is its output
and that params.yaml and every recipe use only the keys it lists.)
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing

from rlvr.objectives.registry import objectives
from rlvr.settings.datasets import DatasetEntry
from rlvr.settings.sections import CORE, LOADED_SECTIONS, Params, ReportParams
from rlvr.settings.train import TrainParams

_FIELD = re.compile(r"^\s+(\w+): [^=#]+?(?: = .+?)?(?:\s+#\s*(.*))?$")
_COMMENT = re.compile(r"^\s+#\s?(.*)$")


def field_comments(cls) -> dict[str, str]:
    """{field: its comment} from the class body: the comment after the field
    (with the comment lines that continue it) and the comment lines above it."""
    notes, above, last = {}, [], None
    for cls_ in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(cls_):
            continue
        for line in inspect.getsource(cls_).splitlines()[1:]:
            comment, field = _COMMENT.match(line), _FIELD.match(line)
            if comment and comment.group(1).startswith("----"):  # a heading among the fields, not a note
                above, last = [], None
                continue
            if comment and not field:
                if last is not None and not above and line.index("#") > 8:  # continues the field's comment
                    notes[last] = f"{notes[last]} {comment.group(1).strip()}".strip()
                else:
                    above.append(comment.group(1).strip())
                continue
            if field and field.group(1) in {f.name for f in dataclasses.fields(cls)}:
                name = field.group(1)
                text = " ".join(above + [field.group(2) or ""]).strip()
                notes[name] = text or notes.get(name, "")
                above, last = [], name
            else:
                above, last = [], None
    return notes


def type_name(tp) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return {list: f"list[{args}]", dict: f"dict[{args}]"}.get(origin, args.replace(", ", " | "))
    return getattr(tp, "__name__", str(tp))


def default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def cell(text: str) -> str:
    """Table cell text: a | inside would end the cell."""
    return text.replace("|", "\\|")


def own_doc(cls) -> str:
    """The class's own docstring, one paragraph (none: dataclasses make one of the signature)."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(f"{cls.__name__}(") else " ".join(inspect.cleandoc(doc).split())


def section(prefix: str, cls, skip: tuple[str, ...] = (), ranges=None) -> list[str]:
    """A table of `cls`'s fields with each numeric one's range (`ranges(name)`:
    its Range or None), then one of each nested dataclass field."""
    hints, notes = typing.get_type_hints(cls), field_comments(cls)
    ranges = ranges or (lambda name: CORE.get(name))
    rows, nested = [], []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            nested.append((f"{prefix}.{f.name}", hints[f.name]))
            continue
        value, allowed = default_of(f), ranges(f"{prefix}.{f.name}")
        shown = "null" if value is None else f"`{value!r}`"
        rows.append("| " + " | ".join(cell(c) for c in (f"`{f.name}`", type_name(hints[f.name]), shown,
                                                           str(allowed or ""), notes.get(f.name, ""))) + " |")
    doc = own_doc(cls)
    out = [f"### `{prefix}`", "", *([doc, ""] if doc else []), "| key | type | default | range | what it does |",
           "|---|---|---|---|---|", *rows, ""]
    for name, sub in nested:
        out += section(name, sub, ranges=ranges)
    return out


def reference() -> str:
    out = ["# Settings", "", "Every key of params.yaml and of a recipe in params/, from the dataclasses that define "
           "them (`rlvr settings` writes this page). Unknown keys, wrong types and values "
           "out of range are errors before anything runs, all reported at once.", "", "## The sections", ""]
    hints = typing.get_type_hints(Params)
    out += ["| key | type | default | range | what it does |", "|---|---|---|---|---|"]
    seeds = next(f for f in dataclasses.fields(Params) if f.name == "seeds")
    out += [f"| `seeds` | {cell(type_name(hints['seeds']))} | `{default_of(seeds)!r}` | {CORE['seeds']} | "
            f"{cell(field_comments(Params)['seeds'])} |", ""]
    for f in dataclasses.fields(Params):
        if dataclasses.is_dataclass(hints.get(f.name)) and f.name not in LOADED_SECTIONS:
            out += section(f.name, hints[f.name])
    out += section("data.<train_sets|benchmarks>[i]", DatasetEntry)  # a dataset entry (docs/data.md)
    out += section("train", TrainParams, ranges=lambda name: TrainParams.ranges.get(name.removeprefix("train.")))
    out += section("report", ReportParams)
    out += ["### `checkpoints`", "", "Released models evaluated as rows of every table, not trained: "
            "`{name: hub id or local directory}`, or `{name: {source: hub id or local directory, eval: {...}}}` "
            "to evaluate that model with the `eval` keys it names changed (the DisCO paper's 32k rows beside an 8k "
            "recipe).", "",
            "## `methods.<name>`: one objective and its settings", "",
            "A method entry names its `objective` and sets that objective's keys below; any `train` key may be "
            "set too (it overrides `train` for this method).", ""]
    for name, spec in objectives().items():
        out += section(f"methods.<name> with objective: {name}", spec.params, skip=("objective",),
                       ranges=lambda key, r=spec.params.ranges: r.get(key.rsplit(".", 1)[-1]))
    return "\n".join(out).rstrip() + "\n"


def documented_keys() -> dict[str, set[str]]:
    """{section: its keys}, nested sections by their dotted name; methods: every objective's and train's keys."""
    def keys(prefix, cls):
        hints = typing.get_type_hints(cls)
        found = {prefix: set()}
        for f in dataclasses.fields(cls):
            found[prefix].add(f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                found.update(keys(f"{prefix}.{f.name}", hints[f.name]))
        return found

    out = {"": {f.name for f in dataclasses.fields(Params)}}
    hints = typing.get_type_hints(Params)
    for f in dataclasses.fields(Params):
        if dataclasses.is_dataclass(hints.get(f.name)):
            out.update(keys(f.name, hints[f.name]))
    out.update(keys("train", TrainParams))
    out.update(keys("report", ReportParams))
    out["methods.*"] = {f.name for spec in objectives().values() for f in dataclasses.fields(spec.params)} \
        | out["train"]
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(description="Print docs/settings.md: every setting, its type, default and meaning, "
                                        "from the settings' dataclasses.").parse_args(argv)
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
