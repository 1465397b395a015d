"""The papers' published rows beside ours: the rows of a recipe's profile,
their notes, and a check that the profile exists."""

from __future__ import annotations

from rlvr.schema import unknown_name


def paper_rows(paper: dict, profile: str | None, columns: list[str]) -> list[list[str]]:
    """Published rows for the matching recipe, in our column order."""
    if not profile or profile not in paper or "rows" not in paper[profile]:
        return []
    key = {"mean": "avg"}
    return [[f"{r['method']} (paper, {r.get('mrl', '')})",
             *[f"{r[key.get(c, c)]:.3f}" if r.get(key.get(c, c)) is not None else "–" for c in columns]]
            for r in paper[profile]["rows"]]


def paper_notes(paper: dict, profile: str | None, methods: list[str]) -> str | None:
    """What the profile publishes beside the main table's rows, and what it
    lacks: its own list, and the methods trained here without a published row."""
    entry = paper.get(profile) if profile else None
    if not entry:
        return None
    parts = []
    if "rows" in entry:
        parts.append(f"The paper's avg@k rows for {entry['base_model']} are in the main table, marked (paper).")
    figures = [f"- {k}: {v}" for k, v in (entry.get("headline") or {}).items()]
    if figures:
        parts.append(f"Published figures for {entry['base_model']}:\n" + "\n".join(figures))
    published = {r["method"] for r in entry.get("rows", [])}
    unpublished = [m for m in methods if m not in published]
    missing = [*entry.get("missing", []), *(["no published row for " + ", ".join(unpublished)] if unpublished else [])]
    if missing:
        parts.append("Not available:\n" + "\n".join(f"- {m}" for m in missing))
    return "\n\n".join(parts)


def check_profile(paper: dict, profile: str | None) -> None:
    """report.paper_profile names a model's entry of paper_results.yaml."""
    known = [k for k, v in paper.items() if isinstance(v, dict)]
    if profile and profile not in known:
        raise ValueError(unknown_name("report.paper_profile", profile, known, "profile"))
