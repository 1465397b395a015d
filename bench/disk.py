"""Disk one training run needs, per recipe: `python bench/disk.py [params/*.yaml]`.

Arithmetic from each recipe's model shape (rlvr.tools.model_shapes.KNOWN_SHAPES) and
train: settings (rlvr.run_files.disk_per_run): the DeepSpeed checkpoint, the
best-on-validation snapshot, the final model; beside it, what keeping every
eval_every snapshot in runs/ and in a copying DVC cache took. The base
model, shared by every run of a recipe, is not counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlvr.run_files import disk_per_run
from rlvr.settings.load import load_params
from rlvr.settings.methods import method_config
from rlvr.tools.model_shapes import model_shape

GB = 1e9


def rows(paths: list[Path]) -> list[list[str]]:
    out = []
    for path in paths:
        params = load_params(path)
        t = method_config(params, next(iter(params.methods))).train
        d = disk_per_run(model_shape(params).params, t)
        out.append([path.stem, f"{d['model'] / GB:.1f}", f"{d['checkpoint'] / GB:.1f}", f"{d['steady'] / GB:.0f}",
                    f"{d['peak'] / GB:.0f}", f"{d['every_snapshot'] / GB:,.0f}"])
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(Path("params").glob("*.yaml"))
    header = ["recipe", "model GB", "checkpoint GB", "per run GB", "at a save GB", "every snapshot kept GB"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows(paths):
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
