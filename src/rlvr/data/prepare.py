"""The data stage: every dataset the pipeline uses, normalized into data/prepared/."""

from __future__ import annotations

from pathlib import Path

from rlvr.config import DataParams
from rlvr.data import arithmetic, sources
from rlvr.data.records import Record, write_jsonl


def prepare(p: DataParams) -> dict[str, int]:
    """Write arithmetic_{train,test}.jsonl, benchmarks/<name>.jsonl for all six
    benchmarks, and train.jsonl (the RL training mixture). Returns row counts."""
    out = Path(p.out_dir)
    counts = {}
    a = p.arithmetic
    arith_train, arith_test = arithmetic.generate(a.levels, a.n_train, a.n_test_per_level, a.seed)
    counts["arithmetic_train"] = write_jsonl(out / "arithmetic_train.jsonl", arith_train)
    counts["arithmetic_test"] = write_jsonl(out / "arithmetic_test.jsonl", arith_test)
    for name in sources.BENCHMARKS:
        # Only the configured benchmarks need the hub online; offline, all six are vendored.
        if p.source == "online" and name not in p.benchmarks:
            continue
        counts[name] = write_jsonl(out / "benchmarks" / f"{name}.jsonl", sources.load(name, p.source, p.vendor_dir))
    mixture: list[Record] = []
    for name in p.train_sets:
        if name == "arithmetic":
            mixture += arith_train
        elif name == "deepscaler":
            mixture += sources.load_hub("deepscaler")
        else:
            mixture += sources.load_vendored(name, p.vendor_dir)
    counts["train"] = write_jsonl(out / "train.jsonl", mixture)
    return counts

