"""The tuning protocol of a params file's `sweep:` section, run with DVC's experiments.

Each configuration of `sweep.grid` (every combination of a method's values)
is one queued `dvc exp run` of that method's train stage with `sweep.seed`,
its values set on the method's entry and validation at its last step
(`eval_every` = its steps), so nothing but the one training reruns. Every
method gets the same number of configurations (check_params refuses a grid
that does not), each is scored on the validation problems (held out of
training and of every test set), and the table names the best per method.

    rlvr sweep run       # queue every configuration, run the queue one at a time, write reports/sweep.md
    rlvr sweep queue     # only queue them (then: dvc exp run --run-all, and rlvr sweep table)
    rlvr sweep table     # reports/sweep.md and reports/sweep.json from the finished experiments
    rlvr sweep commands  # print the dvc commands, run nothing

The experiments stay in DVC (`dvc exp show`, `dvc exp apply <name>`); a new
`rlvr sweep run` first removes the earlier sweep's experiments of the same names.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rlvr.runs import Run
from rlvr.settings.methods import load_recipe, method_config, sweep_configurations
from rlvr.settings.sections import Params

PREFIX = "sweep"
OUT = Path("reports/sweep.md")


@dataclass(frozen=True)
class Configuration:
    method: str
    values: dict[str, float]
    seed: int
    steps: int

    @property
    def name(self) -> str:
        """The DVC experiment's name (a git ref: no spaces)."""
        return "-".join([PREFIX, self.method, *(f"{k}{v:g}" for k, v in self.values.items())])

    def command(self) -> list[str]:
        # `++`: set the key, or add it where the entry inherits it from `train:` (DVC's Hydra overrides)
        sets = [f"++methods.{self.method}.{k}={v!r}" for k, v in self.values.items()]
        sets.append(f"++methods.{self.method}.eval_every={self.steps}")
        return ["dvc", "exp", "run", "--queue", "-n", self.name, *(a for s in sets for a in ("-S", s)),
                f"train@{self.method}-{self.seed}"]


def configurations(params: Params) -> list[Configuration]:
    seed = params.sweep.seed
    if params.sweep.grid and seed not in params.seeds:
        raise SystemExit(f"sweep.seed {seed} is not one of seeds {params.seeds}: its train stage does not exist")
    return [Configuration(name, values, seed, method_config(params, name).train.steps)
            for name, configs in sweep_configurations(params).items() for values in configs]


def dvc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["dvc", *args], capture_output=True, text=True)
    if check and done.returncode:
        raise SystemExit(f"dvc {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done


def queue(configs: list[Configuration]) -> None:
    existing = set(dvc("exp", "list", "--name-only").stdout.split())
    stale = [c.name for c in configs if c.name in existing]
    if stale:
        dvc("exp", "remove", *stale)
        print(f"removed the earlier sweep's {len(stale)} experiments of the same names")
    for c in configs:
        done = subprocess.run(c.command(), capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"queueing {c.name} failed:\n{done.stderr[-2000:]}")
        print(f"queued {c.name}", flush=True)


def finished(names: set[str]) -> dict[str, str]:
    """{experiment name: its commit} of the named experiments DVC finished: its refs
    (refs/exps/<baseline>/<name>), read from git, so a running queue's lock does not matter
    and an experiment made on an earlier commit counts too."""
    done = subprocess.run(["git", "for-each-ref", "refs/exps", "--format=%(refname) %(objectname)"],
                          capture_output=True, text=True, check=True)
    out = {}
    for line in done.stdout.splitlines():
        ref, rev = line.split()
        name = ref.rsplit("/", 1)[-1]
        if name in names and "/celery/" not in ref:
            out[name] = rev
    return out


def summary_of(rev: str, c: Configuration) -> dict | None:
    path = f"{Run(c.method, c.seed).train_dir.as_posix()}/summary.json"
    done = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else None


def table_rows(configs: list[Configuration], summaries: dict[str, dict | None]) -> list[dict]:
    """One row per configuration: its validation avg@k with its interval, its run's
    signal and constraint shares; the best per method marked chosen."""
    rows = []
    for c in configs:
        s = summaries.get(c.name)
        final, mean = (s or {}).get("final", {}), (s or {}).get("mean", {})
        rows.append({"method": c.method, "name": c.name, **c.values, "val": final.get("val_avg@k"),
                     "low": final.get("val_avg@k_low"), "high": final.get("val_avg@k_high"),
                     "informative": None if "zero_variance_groups" not in mean else 1 - mean["zero_variance_groups"],
                     "kl_active": mean.get("kl_active"), "chosen": False})
    for method in dict.fromkeys(c.method for c in configs):
        scored = [r for r in rows if r["method"] == method and r["val"] is not None]
        if scored:
            max(scored, key=lambda r: r["val"])["chosen"] = True  # ties: the first listed
    return rows


def markdown(rows: list[dict], configs: list[Configuration]) -> str:
    out = ["# The tuning sweep: every method the same number of configurations, scored on validation\n",
           "Each configuration trained once (seed " + str(configs[0].seed if configs else 0) + ") and scored at its "
           "last step on the validation problems (held out of training and of the test sets): avg@k with its 95% "
           "bootstrap interval over problems. Rerun: `rlvr sweep run`.\n"]
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        keys = [k for k in configs[[c.method for c in configs].index(method)].values]
        out += [f"## {method}\n", "| " + " | ".join(keys) + " | validation avg@k [95%] | informative groups | "
                "constraint active | chosen |", "|---" * (len(keys) + 4) + "|"]
        for r in mine:
            val = "not run (failed or missing)" if r["val"] is None else \
                f"{r['val']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
            share = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
            out.append("| " + " | ".join(f"{r[k]:g}" for k in keys) + f" | {val} | {share(r['informative'])} | "
                       f"{share(r['kl_active'])} | {'**chosen**' if r['chosen'] else ''} |")
        best = [r for r in mine if r["chosen"]]
        if best:
            rest = [r for r in mine if not r["chosen"] and r["val"] is not None and r["high"] >= best[0]["low"]]
            out.append(f"\n{len(rest)} of the other {len(mine) - 1} configurations have intervals that reach the "
                       "chosen one's: the validation set does not resolve them from it.\n" if rest else
                       "\nThe chosen configuration's interval lies above every other's.\n")
    return "\n".join(out) + "\n"


def write_table(configs: list[Configuration]) -> list[dict]:
    revs = finished({c.name for c in configs})
    rows = table_rows(configs, {c.name: summary_of(revs[c.name], c) for c in configs if c.name in revs})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(markdown(rows, configs))
    OUT.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    missing = [r["name"] for r in rows if r["val"] is None]
    print(f"wrote {OUT} ({len(rows)} configurations" + (f"; not finished: {', '.join(missing)}" if missing else "")
          + ")")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The tuning sweep of params.yaml's sweep: section, as DVC experiments.")
    ap.add_argument("action", choices=("run", "queue", "table", "commands"))
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    configs = configurations(load_recipe(args.params))
    if not configs:
        print(f"{args.params} has no sweep.grid: nothing to sweep")
        return 0
    if args.action == "commands":
        print("\n".join(" ".join(c.command()) for c in configs))
        return 0
    if args.action in ("run", "queue"):
        queue(configs)
    if args.action == "run":
        done = subprocess.run(["dvc", "exp", "run", "--run-all", "-j", "1"])  # foreground: the queue, in order
        if done.returncode:
            print("some configurations failed: `dvc queue status` and `dvc queue logs <name>` say why",
                  file=sys.stderr)
    if args.action in ("run", "table"):
        rows = write_table(configs)
        return 1 if any(r["val"] is None for r in rows) else 0
    return 0


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
