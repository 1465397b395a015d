"""dvc.yaml's source deps are exactly what each stage script imports.

The closure of a stage script is every module under src/rlvr it imports,
directly or through other rlvr modules, at any depth (function-level imports
included: they run too). A stage whose deps miss a file would stay cached when
that file changes; a dep outside the closure reruns a stage for nothing.
"""

import ast
from pathlib import Path

import pytest
import yaml
from helpers import REPO, code_that_runs

SRC = REPO / "src"


def module_file(name: str) -> Path | None:
    """src/ file of an rlvr module (or package) name; None outside rlvr."""
    if name != "rlvr" and not name.startswith("rlvr."):
        return None
    base = SRC.joinpath(*name.split("."))
    if (base / "__init__.py").exists():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").exists() else None


def imported_modules(path: Path, as_program: bool = False) -> set[str]:
    """rlvr module names `path` imports; `from pkg import sub` counts sub when it is a module.
    A module imported by another never runs its `__main__` block: only the program's counts."""
    tree = code_that_runs(ast.parse(path.read_text()), as_program)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names if module_file(f"{node.module}.{a.name}")}
    return {n for n in names if module_file(n)}


def discovered(path: Path) -> set[Path]:
    """A module that imports its package's every module (pkgutil.iter_modules,
    as the objectives' registry does) runs them all."""
    if path.suffix != ".py" or "pkgutil.iter_modules" not in path.read_text():
        return set()
    return set(path.parent.glob("*.py"))


def closure(script: Path) -> set[Path]:
    """Every src/rlvr file the script runs: the modules, and the packages they live in."""
    seen, todo = set(), [script]
    while todo:
        current = todo.pop()
        for f in discovered(current) - seen:
            seen.add(f)
            todo.append(f)
        for name in imported_modules(current, as_program=current == script):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ too
                f = module_file(".".join(parts[:i]))
                if f and f not in seen:
                    seen.add(f)
                    todo.append(f)
    return seen


def covered(deps: list[str]) -> set[Path]:
    """src/ .py files that a list of dvc deps (files or directories) covers."""
    out = set()
    for d in deps:
        p = REPO / d
        if p.is_dir():
            out |= set(p.rglob("*.py"))
        elif p.suffix == ".py":
            out.add(p)
    return {p for p in out if SRC in p.parents}


def stage_scripts(dvc: dict) -> dict[str, tuple[Path, list[str]]]:
    out = {}
    for name, stage in dvc["stages"].items():
        script = next(w for w in stage["cmd"].split() if w.endswith(".py"))
        out[name] = (REPO / script, stage.get("deps", []))
    return out


def dep_problems(dvc: dict) -> list[str]:
    problems = []
    for name, (script, deps) in stage_scripts(dvc).items():
        need, have = closure(script), covered(deps)
        rel = lambda files: sorted(str(f.relative_to(REPO)) for f in files)  # noqa: E731
        if need - have:
            problems.append(f"{name} misses {rel(need - have)}")
        if have - need:
            problems.append(f"{name} depends on code it never runs: {rel(have - need)}")
        if str(script.relative_to(REPO)) not in deps:
            problems.append(f"{name} does not depend on its own script")
    return problems


def test_dvc_yaml_deps_are_the_import_closure():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    assert dep_problems(dvc) == []


def test_a_removed_dep_is_caught():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    dvc["stages"]["train"]["deps"].remove("src/rlvr/data/prompts.py")
    assert dep_problems(dvc) == ["train misses ['src/rlvr/data/prompts.py']"]


def test_an_extra_dep_is_caught():
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    dvc["stages"]["report"]["deps"].append("src/rlvr/training/trainer.py")
    assert "report depends on code it never runs: ['src/rlvr/training/trainer.py']" in dep_problems(dvc)


@pytest.mark.parametrize("stage", ["prepare_data", "prepare_model", "report"])
def test_stages_that_do_not_train_import_no_loss(stage):
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    script, _ = stage_scripts(dvc)[stage]
    losses = {f for f in closure(script) if "objectives" in f.parts and f.name != "__init__.py"}
    assert losses == set()


def test_checking_params_imports_no_training_code():
    """check_params runs first on every params change: it reads the settings and sizes the
    memory budget, never the trainer (its buffer sizes live in rlvr.settings.buffers)."""
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    script, _ = stage_scripts(dvc)["check_params"]
    assert {f for f in closure(script) if {"training", "rollout", "evaluation"} & set(f.parts)} == set()


def test_the_train_stage_depends_on_every_objective_module(tmp_path):
    """A new objective module is a train dep without editing dvc.yaml: the
    stage depends on the objectives' directory, whose registry imports them all."""
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())
    assert "src/rlvr/objectives" in dvc["stages"]["train"]["deps"]
    script, _ = stage_scripts(dvc)["train"]
    assert set((SRC / "rlvr" / "objectives").glob("*.py")) <= closure(script)


def test_layers_have_no_back_edges():
    """The params schema imports nothing else of rlvr but its machinery, and
    the components the update drives (the model's forward, the rollout engine
    and groups, the loss-call plan) import no objective: what an objective
    needs reaches them as values (ObjectiveParams.needs)."""
    rlvr = SRC / "rlvr"
    assert closure(rlvr / "schema.py") == set()
    assert {f for f in closure(rlvr / "settings" / "sections.py") if "settings" not in f.parts} == \
        {rlvr / "__init__.py", rlvr / "schema.py"}
    for component in ("training/policy.py", "rollout/vllm_engine.py", "rollout/groups.py", "training/loss_calls.py",
                      "settings/load.py", "evaluation/evaluator.py"):
        assert not {f for f in closure(rlvr / component) if "objectives" in f.parts}, component


def test_bytecode_never_changes_a_directory_dep():
    """src/rlvr/objectives is a directory dep: the __pycache__ Python writes into
    it must not change its hash, or every dvc repro after the first would
    retrain every method."""
    import subprocess
    import sys

    def ignored(path: str) -> bool:
        return subprocess.run([sys.executable, "-m", "dvc", "check-ignore", path], cwd=REPO,
                              capture_output=True).returncode == 0

    assert ignored("src/rlvr/objectives/__pycache__/base.cpython-311.pyc")
    assert not ignored("src/rlvr/objectives/base.py")


def import_cycles(root: Path) -> list[list[str]]:
    """Cycles among the modules under `root` (a src/ directory), function-level
    imports included; an import of a module's own package is not an edge (a
    package is initialized before its modules run), nor one in a module's
    `__main__` block (it runs only when the module is the program, which
    nothing imports)."""
    def module_file_under(name: str) -> Path | None:
        base = root.joinpath(*name.split("."))
        if (base / "__init__.py").exists():
            return base / "__init__.py"
        return base.with_suffix(".py") if base.with_suffix(".py").exists() else None

    graph = {}
    for f in root.rglob("*.py"):
        packages = {p / "__init__.py" for p in f.parents if root in p.parents}
        edges = set()
        tree = code_that_runs(ast.parse(f.read_text()))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] + [node.module] \
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for name in names:
                target = module_file_under(name)
                if target and target != f and target not in packages:
                    edges.add(target)
        graph[f] = edges
    cycles, done = [], set()

    def visit(node, path):
        for nxt in graph.get(node, ()):
            if nxt in path:
                cycles.append([str(p.relative_to(root)) for p in path[path.index(nxt):]] + [str(nxt.relative_to(root))])
            elif nxt not in done:
                visit(nxt, path + [nxt])
        done.add(node)

    for start in sorted(graph):
        if start not in done:
            visit(start, [start])
    return cycles


def test_no_module_imports_itself_through_others():
    """No import cycle in rlvr, counting the imports inside functions (the
    graders once imported each other that way)."""
    assert import_cycles(SRC) == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from pkg.a import f\n    return f\n")
    assert import_cycles(tmp_path) == [["pkg/a.py", "pkg/b.py", "pkg/a.py"]]
