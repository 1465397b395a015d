"""The data stage: every dataset the pipeline uses, normalized into data/prepared/.

The training mixture (train/) and the evaluation sets (eval/) are written
apart, so that a change of benchmarks leaves the training input, and with it
every trained model, untouched.
"""

from __future__ import annotations

import random

from rlvr.atomic import write_json
from rlvr.data import arithmetic, sources
from rlvr.data.prompts import prompt_token_ids
from rlvr.data.records import Record, problem_key, write_jsonl
from rlvr.settings.datasets import ARITHMETIC, DataParams, entry_of, name_of, vendored
from rlvr.settings.prompt import PromptParams


def drop_long_prompts(records: list[Record], limit: int, tokenizer, prompt: PromptParams) -> tuple[list[Record], int]:
    """(kept, dropped count): records whose training prompt, as the model sees
    it, has at most `limit` tokens, as verl's rl_dataset filters
    (`len(apply_chat_template(messages, add_generation_prompt=True)) <= max_prompt_length`)."""
    from tqdm import tqdm

    kept = [r for r in tqdm(records, desc=f"prompts <= {limit} tokens", unit="prompt", mininterval=5)
            if len(prompt_token_ids(r.problem, tokenizer, prompt, r.system)) <= limit]
    return kept, len(records) - len(kept)


def hold_out(mixture: list[Record], size: int) -> tuple[list[Record], list[Record]]:
    """(training, validation): `size` problems drawn from the mixture with a
    fixed seed, and every copy of each (the same problem text) removed from
    it, so a problem that repeats is not validated on while trained on; the
    rest keep their order."""
    if size > len(mixture) // 2:
        raise ValueError(f"data.validation_size ({size}) would hold out over half of the training mixture "
                         f"({len(mixture)} problems): lower it")
    picked = set(random.Random(0).sample(range(len(mixture)), size))
    held = {mixture[i].problem for i in picked}
    return ([r for r in mixture if r.problem not in held],
            [r for i, r in enumerate(mixture) if i in picked])


def prepare(p: DataParams, prompt: PromptParams | None = None, tokenizer=None) -> dict[str, int]:
    """Write train/train.jsonl (the RL training mixture), train/validation.jsonl
    (held out of it: the arithmetic task's validation split and data.validation_size
    problems of the mixture), eval/arithmetic.jsonl
    (held-out arithmetic), eval/<name>.jsonl for each configured benchmark, and
    eval/sets.json (each set's source, rows and shared problems, for the report).
    With data.max_prompt_tokens, training problems whose prompt (`prompt`, the
    training prompt, through `tokenizer`) is longer are dropped first.
    Returns row counts."""
    a = p.arithmetic
    arith = arithmetic.splits(a.levels, a.n_train, a.n_test_per_level, a.seed, a.n_validation_per_level)
    counts = {ARITHMETIC: write_jsonl(p.eval_dir / "arithmetic.jsonl", arith.test)}
    skipped: dict[str, list[int]] = {}
    evaluated: dict[str, list[Record]] = {ARITHMETIC: arith.test}
    for item in p.benchmarks:
        name = name_of(item)
        evaluated[name] = sources.load_set(item, p, skipped.setdefault(name, []))
        counts[name] = write_jsonl(p.eval_dir / f"{name}.jsonl", evaluated[name])
    trained: dict[str, list[Record]] = {}
    for item in p.train_sets:
        name = name_of(item)
        trained[name] = arith.train if item == ARITHMETIC else sources.load_set(item, p, skipped.setdefault(name, []))
    mixture = [r for records in trained.values() for r in records]
    write_json(p.skipped_rows_file, {name: lines for name, lines in skipped.items() if lines})
    write_json(p.sets_file, sets_summary(p, trained, evaluated, skipped))
    if p.max_prompt_tokens is not None:
        if prompt is None or tokenizer is None:
            raise ValueError("data.max_prompt_tokens is set: prepare() needs the training prompt and the tokenizer")
        mixture, counts["dropped_long_prompts"] = drop_long_prompts(mixture, p.max_prompt_tokens, tokenizer, prompt)
    mixture, validation = hold_out(mixture, p.validation_size)
    validation = (arith.validation if ARITHMETIC in p.train_names else []) + validation
    counts["train"] = write_jsonl(p.train_dir / "train.jsonl", mixture)
    p.validation_file.unlink(missing_ok=True)
    if validation:
        counts["validation"] = write_jsonl(p.validation_file, validation)
    return counts


def source_of(item, p: DataParams) -> str:
    """Where a set's rows came from, as the report names it."""
    if item == ARITHMETIC:
        return "generated (rlvr.data.arithmetic)"
    e = entry_of(item)
    if e.path:
        return e.path
    if sources.reads_vendored(e, p):
        return f"{p.vendor_dir}/{vendored(e.name)}"
    if p.hub_mirror:
        return f"{p.hub_mirror} (mirror of {e.where})"
    commit = sources.hub_commit(e.hub, e.revision)
    return f"hub {e.where}, " + (f"commit {commit}" if commit else "newest revision (the hub named no commit)")


def sets_summary(p: DataParams, trained: dict[str, list[Record]], evaluated: dict[str, list[Record]],
                 skipped: dict[str, list[int]]) -> dict[str, dict]:
    """Each set's role, source, rows and skipped rows, and, for a training set, the problems it
    shares with each evaluation set (contamination, counted, never dropped silently)."""
    items = {name_of(i): i for i in [*p.train_sets, *p.benchmarks]} | {ARITHMETIC: ARITHMETIC}
    seen = {name: {problem_key(r.problem) for r in records} for name, records in evaluated.items()}
    out = {}
    for role, sets in (("train", trained), ("eval", evaluated)):
        for name, records in sets.items():
            row = {"role": role, "source": source_of(items[name], p), "rows": len(records),
                   "skipped": len(skipped.get(name, []))}
            if role == "train":
                mine = {problem_key(r.problem) for r in records}
                row["shared"] = {b: n for b, keys in seen.items() if (n := len(mine & keys))}
            out[f"{role}/{name}"] = row
    return out
