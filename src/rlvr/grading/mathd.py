"""Hendrycks' MATH normalization as DisCO's official grader carries it
(deepscaler/rewards/math_utils/utils.py: `_strip_string` and its helpers),
and the normalized answer `grade_mathd` compares."""

from __future__ import annotations

import re


def _strip_string(string: str) -> str:
    """Hendrycks' MATH normalization (utils.py `_strip_string`)."""
    string = string.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    string = string.replace("tfrac", "frac").replace("dfrac", "frac")
    string = string.replace("\\left", "").replace("\\right", "")
    string = string.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\$", "")
    if "\\text{ " in string:  # units on the right
        parts = string.split("\\text{ ")
        assert len(parts) == 2
        string = parts[0]
    string = string.replace("\\%", "")  # the official "\\%" and "\%" are the same string
    string = string.replace(" .", " 0.").replace("{.", "{0.")
    if not string:
        return string
    if string[0] == ".":
        string = "0" + string
    if len(string.split("=")) == 2 and len(string.split("=")[0]) <= 2:
        string = string.split("=")[1]
    string = _fix_sqrt(string).replace(" ", "")
    string = _fix_fracs(string)
    if string == "0.5":
        string = "\\frac{1}{2}"
    return _fix_a_slash_b(string)


def _fix_fracs(string: str) -> str:
    parts = string.split("\\frac")
    out = parts[0]
    for sub in parts[1:]:
        out += "\\frac"
        if sub[0] == "{":  # an empty part raises, as the official code: mathd_normalize keeps the answer
            out += sub
            continue
        if len(sub) < 2:
            return string
        a, b, rest = sub[0], sub[1], sub[2:]
        out += "{" + a + "}{" + b + "}" + rest if b != "{" else "{" + a + "}" + b + rest
    return out


def _fix_a_slash_b(string: str) -> str:
    if len(string.split("/")) != 2:
        return string
    a, b = string.split("/")
    try:
        a, b = int(a), int(b)
        assert string == f"{a}/{b}"
        return "\\frac{" + str(a) + "}{" + str(b) + "}"
    except (ValueError, AssertionError):
        return string


def _fix_sqrt(string: str) -> str:
    if "\\sqrt" not in string:
        return string
    parts = string.split("\\sqrt")
    return parts[0] + "".join("\\sqrt" + (s if s[0] == "{" else "{" + s[0] + "}" + s[1:]) for s in parts[1:])


def mathd_normalize(answer: str | None) -> str | None:
    if answer is None:
        return None
    answer = answer.strip()
    try:
        m = re.search(r"^\\text\{(?P<text>.+?)\}$", answer)
        if m is not None:
            answer = m.group("text").strip()
        return _strip_string(answer)
    except Exception:  # noqa: BLE001  as the official code: any failure leaves the answer as it is
        return answer
