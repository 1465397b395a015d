"""A procedurally generated arithmetic task with difficulty levels.

Every problem is an expression tree built from a seeded RNG; its gold answer is
computed from the tree, never by parsing text. Levels (distinct problems):

  1  one-digit addition                      3 + 5                  100
  2  one-digit times one-digit               7 * 8                  100
  3  two-digit addition or subtraction       47 - 18             16,200
  4  two-digit times one-digit               23 * 7                 720
  5  three two-digit terms, + and -          52 - 17 + 38        ~2.9 M
  6  multi-step with parentheses             (14 + 9) * 6 - 35     many
  7  two products and a sum                  12 * 7 + 9 * 8 - 41   many

SmolLM2-135M solves about a third of levels 1 and 2 and under a tenth of the
others (reports/signal_probe.md), so the one-digit levels are where a group of
sampled responses holds both right and wrong ones.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rlvr.data.records import Record
from rlvr.settings.datasets import LEVELS


@dataclass(frozen=True)
class Num:
    value: int

    def render(self) -> str:
        return str(self.value)

    def evaluate(self) -> int:
        return self.value


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - *
    left: "Num | BinOp"
    right: "Num | BinOp"

    def render(self) -> str:
        return f"{_operand(self.left, self.op, False)} {self.op} {_operand(self.right, self.op, True)}"

    def evaluate(self) -> int:
        a, b = self.left.evaluate(), self.right.evaluate()
        return {"+": a + b, "-": a - b, "*": a * b}[self.op]


_PRECEDENCE = {"+": 1, "-": 1, "*": 2}


def _operand(node, parent_op: str, is_right: bool) -> str:
    """Parenthesize a child only where precedence (or '-' on the right) needs it."""
    text = node.render()
    if isinstance(node, BinOp):
        p, c = _PRECEDENCE[parent_op], _PRECEDENCE[node.op]
        if c < p or (is_right and c == p and parent_op == "-"):
            return f"({text})"
    return text


def _expression(level: int, rng: random.Random) -> BinOp:
    d1 = lambda: Num(rng.randint(0, 9))  # noqa: E731
    d2 = lambda: Num(rng.randint(10, 99))  # noqa: E731
    pm = lambda: rng.choice("+-")  # noqa: E731
    if level == 1:
        return BinOp("+", d1(), d1())
    if level == 2:
        return BinOp("*", d1(), d1())
    if level == 3:
        return BinOp(pm(), d2(), d2())
    if level == 4:
        return BinOp("*", d2(), Num(rng.randint(2, 9)))
    if level == 5:
        return BinOp(pm(), BinOp(pm(), d2(), d2()), d2())
    if level == 6:
        return BinOp("-", BinOp("*", BinOp(pm(), d2(), Num(rng.randint(1, 9))), Num(rng.randint(2, 9))), d2())
    if level == 7:
        prod = lambda: BinOp("*", d2(), Num(rng.randint(2, 9)))  # noqa: E731
        return BinOp(pm(), BinOp("+", prod(), prod()), d2())
    raise ValueError(f"arithmetic level must be one of {LEVELS}, got {level}")


def make_problem(level: int, rng: random.Random) -> tuple[str, int]:
    expr = _expression(level, rng)
    return expr.render(), expr.evaluate()


# Distinct problems of the small levels: a held-out split takes at most half of a level
# (validation at most a quarter), so its training questions are never all held out.
SPACE = {1: 100, 2: 100, 4: 720}


@dataclass(frozen=True)
class Splits:
    train: list[Record]
    test: list[Record]
    validation: list[Record]


def generate(levels: list[int], n_train: int, n_test_per_level: int, seed: int) -> tuple[list[Record], list[Record]]:
    """(train, test): `splits` without a validation split."""
    s = splits(levels, n_train, n_test_per_level, seed)
    return s.train, s.test


def held_out_counts(level: int, n_test: int, n_validation: int) -> tuple[int, int]:
    """Problems of `level` in the test and validation splits: as asked, capped at
    half and a quarter of the level's distinct problems."""
    space = SPACE.get(level)
    return (n_test, n_validation) if space is None else (min(n_test, space // 2), min(n_validation, space // 4))


def splits(levels: list[int], n_train: int, n_test_per_level: int, seed: int,
           n_validation_per_level: int = 0) -> Splits:
    """Deterministic, disjoint train, test and validation splits.

    The test split is drawn first, per level, then the validation split, each
    from a stream of its own and of distinct problems (held_out_counts caps the
    small levels); train skips every held-out expression, so held-out accuracy
    is really held out. Train is balanced over levels (round-robin), and a small
    level's training problems repeat.
    """
    for lv in levels:
        if lv not in LEVELS:
            raise ValueError(f"data.arithmetic.levels: unknown level {lv}; valid levels are {list(LEVELS)}")
    counts = {lv: held_out_counts(lv, n_test_per_level, n_validation_per_level) for lv in levels}
    seen: set[str] = set()
    test = _held_out(levels, {lv: c[0] for lv, c in counts.items()}, random.Random(seed), seen, "test")
    validation = _held_out(levels, {lv: c[1] for lv, c in counts.items()}, random.Random(seed * 7919 + 2), seen,
                           "validation")
    # Train draws from streams of its own, one per level: a larger test split leaves the
    # training questions (and so every trained model) as they were, but for the few it now holds.
    streams = {lv: random.Random((seed * 7919 + 1) * 101 + lv) for lv in levels}
    train = []
    for i in range(n_train):
        lv = levels[i % len(levels)]
        text, value = make_problem(lv, streams[lv])
        while text in seen:  # a held-out problem: draw again from the same level (caps leave it a quarter)
            text, value = make_problem(lv, streams[lv])
        train.append(_record(f"arith-train-{i}", text, value, lv))
    return Splits(train, test, validation)


def _held_out(levels: list[int], counts: dict[int, int], rng: random.Random, seen: set[str],
              split: str) -> list[Record]:
    """`counts[level]` distinct problems of each level, none in `seen` (which grows)."""
    out = []
    for lv in levels:
        made = 0
        while made < counts[lv]:
            text, value = make_problem(lv, rng)
            if text in seen:
                continue
            seen.add(text)
            out.append(_record(f"arith-{split}-L{lv}-{made}", text, value, lv))
            made += 1
    return out


def _record(rid: str, expression: str, value: int, level: int) -> Record:
    return Record(id=rid, problem=f"Compute {expression}.", answer=str(value), source="arithmetic", level=level)
