"""The report's figures, their captions, and the self-contained HTML."""

from pathlib import Path


def test_figures_and_self_contained_html(report):
    root, out = report
    names = sorted(Path(f).name for f in out["figures"])
    assert names == ["constraint.png", "difficulty_bias.png", "difficulty_training.png", "entropy_groups.png",
                     "kl_length.png", "pass_at_k.png", "scores.png", "training_dynamics.png"]
    for f in out["figures"]:
        assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(f).stat().st_size > 10_000
    html = (root / "reports/index.html").read_text()
    assert html.count("data:image/png;base64,") == 8 and "<table>" in html
    # the summary's figure comes first, before any table, with its caption once, under it
    from rlvr.report.figure_set import CAPTIONS

    assert html.index(f'alt="{CAPTIONS["scores"]}"') < html.index("<table>")
    assert html.count(f"<figcaption>{CAPTIONS['scores']}</figcaption>") == 1
    assert html.count(CAPTIONS["training_dynamics"]) == 2  # alt text and caption; not a third time as a paragraph
    assert "text-align:left" in html
    md = (root / "reports/results.md").read_text()
    assert all(f"*{CAPTIONS[Path(f).stem]}*" in md for f in out["figures"])  # every figure says how to read it

