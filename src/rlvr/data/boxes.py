"""The last \\boxed{...} of a text: where a solution states its answer, read
by the data stage (a gold stored inside a solution) and by the grader (a
response's final answer)."""

from __future__ import annotations


def last_box(text: str) -> tuple[int, str] | None:
    """(start, content) of the last closed \\boxed{...} (nested braces allowed)."""
    start = text.rfind("\\boxed")
    while start >= 0:
        i = text.find("{", start)
        depth, j = 0, i
        while 0 <= j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return start, text[i + 1 : j]
            j += 1
        start = text.rfind("\\boxed", 0, start)
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last closed \\boxed{...} of `text` (a stored solution's answer), or None."""
    found = last_box(text)
    return None if found is None else found[1].strip()
