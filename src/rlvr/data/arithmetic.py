"""A procedurally generated arithmetic task with difficulty levels.

Every problem is an expression tree built from a seeded RNG; its gold answer is
computed from the tree, never by parsing text. Levels:

  1  one-digit addition                      3 + 5
  2  two-digit addition or subtraction       47 - 18
  3  two-digit times one-digit               23 * 7
  4  three two-digit terms, + and -          52 - 17 + 38
  5  multi-step with parentheses             (14 + 9) * 6 - 35
  6  two products and a sum                  12 * 7 + 9 * 8 - 41
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
        return BinOp(pm(), d2(), d2())
    if level == 3:
        return BinOp("*", d2(), Num(rng.randint(2, 9)))
    if level == 4:
        return BinOp(pm(), BinOp(pm(), d2(), d2()), d2())
    if level == 5:
        return BinOp("-", BinOp("*", BinOp(pm(), d2(), Num(rng.randint(1, 9))), Num(rng.randint(2, 9))), d2())
    if level == 6:
        prod = lambda: BinOp("*", d2(), Num(rng.randint(2, 9)))  # noqa: E731
        return BinOp(pm(), BinOp("+", prod(), prod()), d2())
    raise ValueError(f"arithmetic level must be one of {LEVELS}, got {level}")


def make_problem(level: int, rng: random.Random) -> tuple[str, int]:
    expr = _expression(level, rng)
    return expr.render(), expr.evaluate()


def generate(levels: list[int], n_train: int, n_test_per_level: int, seed: int) -> tuple[list[Record], list[Record]]:
    """Deterministic train and held-out test splits.

    The test split is drawn first, per level; train then skips any expression
    that appears in the test split, so held-out accuracy is really held out.
    Train is balanced over levels (round-robin).
    """
    for lv in levels:
        if lv not in LEVELS:
            raise ValueError(f"data.arithmetic.levels: unknown level {lv}; valid levels are {list(LEVELS)}")
    rng = random.Random(seed)
    test, seen = [], set()
    for lv in levels:
        made, tries = 0, 0
        while made < n_test_per_level:
            text, value = make_problem(lv, rng)
            tries += 1
            if text in seen and tries < 100 * n_test_per_level:
                continue
            seen.add(text)
            test.append(_record(f"arith-test-L{lv}-{made}", text, value, lv))
            made += 1
    # Train draws from a stream of its own: a larger test split leaves the training
    # questions (and so every trained model) as they were, but for the few it now holds.
    rng = random.Random(seed * 7919 + 1)
    train = []
    i = 0
    while len(train) < n_train:
        lv = levels[i % len(levels)]
        i += 1
        text, value = make_problem(lv, rng)
        if text in seen:
            if i > 1000 * (n_train + 1):
                raise ValueError("data.arithmetic: the test split uses up every problem of some level; lower n_test_per_level")
            continue
        train.append(_record(f"arith-train-{len(train)}", text, value, lv))
    return train, test


def _record(rid: str, expression: str, value: int, level: int) -> Record:
    return Record(id=rid, problem=f"Compute {expression}.", answer=str(value), source="arithmetic", level=level)
