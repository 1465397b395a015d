"""`rlvr <tool> [args]` (or `python -m rlvr <tool>`): the project's commands
for a person at a terminal. Each tool is a module with `main(argv)`; `rlvr
<tool> --help` prints its own help."""

from __future__ import annotations

import importlib
import sys

from rlvr.cli import tool

TOOLS = {  # name: (module, what it does)
    "smoke": ("rlvr.tools.smoke", "each objective of a recipe for two steps on this node, a verdict per check"),
    "dryrun": ("rlvr.tools.dryrun", "a recipe's whole path on CPU with a tiny model and its real settings"),
    "memory": ("rlvr.tools.memory", "the per-GPU memory budget of a recipe (or of every recipe)"),
    "methods": ("rlvr.settings.methods", "a recipe's methods: objective and every non-default setting"),
    "sweep": ("rlvr.tools.sweep", "the tuning sweep of params' sweep: section, as queued DVC experiments"),
    "ui": ("rlvr.tracking.ui", "MLflow's UI on the project's store, opened on the runs table"),
    "settings": ("rlvr.settings.reference", "print docs/settings.md: every setting, its type, default and meaning"),
    "doc-blocks": ("rlvr.tools.doc_blocks", "rewrite the docs' generated blocks from reports/"),
}


def usage() -> str:
    width = max(map(len, TOOLS))
    return "usage: rlvr <tool> [args]  (rlvr <tool> --help for its own)\n\n" + "\n".join(
        f"  {name:<{width}}  {about}" for name, (_, about) in TOOLS.items())


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    if name not in TOOLS:
        print(f"error: no tool '{name}'\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [f"rlvr {name}", *rest]  # argparse's prog: `rlvr memory`, not `__main__.py`
    module = importlib.import_module(TOOLS[name][0])
    tool(lambda: module.main(rest))


if __name__ == "__main__":
    main()
