"""The package's layout: packages by role, in one order, each importing only
its own and the ones below it; a few flat foundations; no module over 300
lines. `rlvr <tool>` (rlvr/__main__.py) is the program on top of them all."""

import ast
from pathlib import Path

from helpers import REPO, code_that_runs

RLVR = REPO / "src" / "rlvr"
# Bottom to top: a package may import itself and what comes before it.
ORDER = ("", "objectives", "settings", "data", "grading", "rollout", "tracking", "evaluation", "training", "report",
         "tools")
# "": the flat foundations, which import only each other.
FOUNDATIONS = {"__init__", "atomic", "cli", "digests", "distributed", "model", "run_files", "runs", "schema", "stats",
               "stopping"}
MAX_LINES = 300


def layer(path: Path) -> str:
    """The package a file of src/rlvr belongs to ("" for a flat module)."""
    parts = path.relative_to(RLVR).parts
    return parts[0] if len(parts) > 1 else ""


def rlvr_imports(path: Path) -> set[str]:
    """Packages (or "" for a flat module) that `path` imports, function-level
    imports included, its `__main__` and TYPE_CHECKING blocks left out (they never run on import)."""
    tree = code_that_runs(ast.parse(path.read_text()))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | ({f"{node.module}.{a.name}" for a in node.names} if node.module == "rlvr" else set())
    out = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != "rlvr" or len(parts) == 1:
            continue
        out.add(parts[1] if (RLVR / parts[1]).is_dir() else "")
    return out


def upward_imports(root: Path = RLVR) -> list[str]:
    problems = []
    for f in sorted(root.rglob("*.py")):
        if f.name == "__main__.py" and f.parent == root:
            continue
        own = layer(f)
        for target in rlvr_imports(f):
            if ORDER.index(target) > ORDER.index(own):
                problems.append(f"{f.relative_to(root)} ({own or 'flat'}) imports {target or 'a flat module'}, above it")
    return problems


def test_every_package_has_its_place_in_the_order():
    packages = {p.name for p in RLVR.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ORDER) - {""}


def test_no_package_imports_one_above_it():
    assert upward_imports() == []


def test_an_upward_import_is_caught(monkeypatch, tmp_path):
    planted = RLVR / "objectives" / "advantages.py"
    text = planted.read_text() + "\n\ndef _planted():\n    from rlvr.training.trainer import Trainer\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == planted else
                        Path.read_bytes(self).decode())
    assert upward_imports() == ["objectives/advantages.py (objectives) imports training, above it"]


def test_the_flat_modules_are_the_foundations():
    flat = {f.stem for f in RLVR.glob("*.py")} - {"__main__"}
    assert flat == FOUNDATIONS


def test_no_module_is_over_300_lines():
    long = {str(f.relative_to(RLVR)): n for f in RLVR.rglob("*.py") if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_readme_map_names_every_package():
    readme = (REPO / "README.md").read_text()
    assert all(f"{name}/" in readme for name in ORDER if name)


def test_the_tests_mirror_the_packages():
    """tests/<package>/ for a package's unit tests; e2e/ the end-to-end tier, fixtures/ their data."""
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - {"e2e", "fixtures"} <= set(ORDER) - {""}


def test_every_dotted_name_in_the_docs_and_code_exists():
    """`rlvr.<module>.<name>` in a doc, a docstring or a message names a module
    or an attribute that exists: a moved module leaves no stale name behind."""
    import importlib
    import importlib.util
    import re
    import subprocess

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent that is a module, not a package
            return False

    files = subprocess.run(["git", "ls-files", "*.md", "*.py", "*.yaml", "*.sh"], cwd=REPO, capture_output=True,
                           text=True).stdout.split()
    modules = {p.stem for p in RLVR.iterdir()} - {"__pycache__"}
    stale = set()
    for f in files:
        if f.startswith(("reports/", "data/")):
            continue
        for name in re.findall(r"(?<![\w/.])rlvr(?:\.\w+)+", (REPO / f).read_text()):
            parts = name.split(".")
            if parts[1] not in modules:  # an MLflow tag such as rlvr.pipeline
                continue
            i = next(i for i in range(len(parts), 0, -1) if is_module(".".join(parts[:i])))
            obj = importlib.import_module(".".join(parts[:i]))
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    stale.add(f"{f}: {name}")
                    break
                obj = getattr(obj, attr)
    assert sorted(stale) == []


def module_imports(path: Path) -> set[str]:
    """The rlvr modules `path` imports at its top level, TYPE_CHECKING blocks included (a circle of
    annotations is a circle still); imports inside functions are deferred on purpose and left out."""
    tree = ast.parse(path.read_text())
    nodes = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    nodes += [n for block in tree.body if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
              for n in block.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    out = set()
    for node in nodes:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] + [f"{node.module}.{a.name}" for a in node.names] if node.module and node.level == 0
                 else [])
        out |= {n for n in names if n.startswith("rlvr.") and module_file(n)}
    return out


def module_file(name: str) -> Path | None:
    path = RLVR.parent / name.replace(".", "/")
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else None


def import_circles() -> list[list[str]]:
    """Each circle of top-level imports among rlvr's modules, as the modules around it."""
    graph = {}
    for f in RLVR.rglob("*.py"):
        name = ".".join(f.relative_to(RLVR.parent).with_suffix("").parts)
        graph[name] = {n for n in module_imports(f) if n != name}
    circles, done = [], set()

    def visit(node, path):
        if node in path:
            circles.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return circles


def test_no_two_modules_import_each_other_even_for_annotations():
    assert import_circles() == []


def test_a_circle_of_annotations_is_caught(monkeypatch):
    """The circle the settings had: train.py uses CallPlan, call_plan.py annotated with TrainParams."""
    planted = RLVR / "settings" / "train.py"
    text = planted.read_text() + "\nif TYPE_CHECKING:\n    from rlvr.settings.call_plan import CallPlan\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == planted else
                        Path.read_bytes(self).decode())
    assert [set(c) for c in import_circles()] == [{"rlvr.settings.call_plan", "rlvr.settings.train"}]
