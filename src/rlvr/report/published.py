"""The papers' published rows beside ours: the rows of a recipe's profile,
their notes, and a check that the profile exists."""

from __future__ import annotations

from rlvr.schema import unknown_name

NO_SOURCE = "no source found"  # in the papers' text or the official READMEs (paper_results.yaml says why)


def sourced(entry: dict, headline: str | None = None) -> bool:
    """Whether a profile's rows (or one of its headline figures) name where they were read."""
    if headline is not None:
        return headline in (entry.get("headline_sources") or {})
    return bool(entry.get("source"))


def paper_rows(paper: dict, profile: str | None, columns: list[str]) -> list[list[str]]:
    """Published rows for the matching recipe, in our column order; rows
    without a source say so in their name."""
    if not profile or profile not in paper or "rows" not in paper[profile]:
        return []
    key = {"mean": "avg"}
    mark = "" if sourced(paper[profile]) else f", {NO_SOURCE}"
    return [[f"{r['method']} (paper, {r.get('mrl', '')}{mark})",
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
        where = (f"read from {entry['source']}" if sourced(entry)
                 else f"{NO_SOURCE}: {entry.get('unsourced', 'unknown')}; marked so in each row")
        parts.append(f"The paper's avg@k rows for {entry['base_model']} are in the main table, marked (paper); "
                     f"{where}.")
    sources = entry.get("headline_sources") or {}
    figures = [f"- {k}: {v} ({'source: ' + sources[k] if k in sources else NO_SOURCE})"
               for k, v in (entry.get("headline") or {}).items()]
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
