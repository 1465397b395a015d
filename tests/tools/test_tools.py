"""Every `rlvr <tool>` answers: --help says what it does, bad input is
one `error:` line (or a list of params problems) with exit status 2, never a traceback."""

import importlib
import subprocess
import sys

import pytest
from helpers import REPO

from rlvr.__main__ import TOOLS
from rlvr.cli import tool

RECIPE_ARG = {"methods": ["nope.yaml"], "memory": ["nope.yaml"], "dryrun": ["nope.yaml"], "smoke": ["nope.yaml"],
              "ui": ["--params", "nope.yaml"]}


@pytest.mark.parametrize("name", TOOLS)
def test_help_says_what_the_tool_does(name, capsys):
    with pytest.raises(SystemExit) as done:
        importlib.import_module(TOOLS[name][0]).main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and len(out.splitlines()) >= 3


@pytest.mark.parametrize("name", sorted(RECIPE_ARG))
def test_a_missing_recipe_is_one_error_and_exit_2(name, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main = importlib.import_module(TOOLS[name][0]).main
    with pytest.raises(SystemExit) as done:
        tool(lambda: main(RECIPE_ARG[name]))
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nope.yaml" in err and "Traceback" not in err


def test_methods_lists_each_method_with_its_objective_and_changed_settings(capsys):
    from rlvr.settings.methods import main

    assert main([str(REPO / "params/disco_1.5b.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "disco_lratio: disco (score='lratio', tau=1.0)" in lines
    assert any(line.startswith("dapo_full: dapo (") and "train.dynamic_sampling=True" in line for line in lines)
    assert "grpo: grpo" in lines  # every setting at its default: nothing listed


def test_the_command_is_wired(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlvr", "methods", "nope.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr


def test_an_unknown_tool_lists_the_tools(capsys):
    from rlvr.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["memroy"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no tool 'memroy'") and all(f"  {name} " in err for name in TOOLS)


def test_the_console_script_is_the_command():
    """pyproject's `rlvr` script runs rlvr.__main__:main, the function tested above."""
    import tomllib

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"] == {"rlvr": "rlvr.__main__:main"}
