"""The report's data section: each set the data stage read, its source and
rows, and the problems a training set shares with an evaluation set (from
data/prepared/eval/sets.json, which each evaluation carries)."""

from __future__ import annotations

from rlvr.report.format import markdown


def data_section(sets: dict[str, dict]) -> str:
    """A table of the sets, then the shared problems counted (never dropped)."""
    rows = []
    for key, s in sets.items():
        role, name = key.split("/", 1)
        shared = ", ".join(f"{b} {n}" for b, n in s.get("shared", {}).items()) or ("none" if role == "train" else "")
        rows.append([name, "training" if role == "train" else "evaluation", s["source"], f"{s['rows']:,}",
                     f"{s['skipped']:,}", shared])
    table = markdown(["set", "role", "source", "rows", "rows skipped", "problems shared with an evaluation set"], rows)
    shared = [key for key, s in sets.items() if s.get("shared")]
    note = (f"\n\n**{len(shared)} training set(s) share problems with an evaluation set**: those evaluation scores "
            "include problems the model trained on." if shared else "")
    return f"## Data\n\n{table}{note}"


def sets_of(results) -> dict[str, dict] | None:
    """The sets one evaluation read (every evaluation of a report reads the same prepared data)."""
    return next((x["data"] for m in results.values() for x in m.metrics if x.get("data")), None)
