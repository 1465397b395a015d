"""Hostile model output and tracking faults never stop the pipeline."""

import time
import warnings

from rlvr.grading.pool import Verifier
from rlvr.tracking.tracker import Tracker

HOSTILE = [
    "\\boxed{9^{9^{9^{9}}}}",
    "\\boxed{" + "\\frac{1}{" * 400 + "2" + "}" * 400 + "}",
    "1+" * 500_000 + "1",  # a megabyte of text
    "\\boxed{" + "(" * 5000 + "}",
    "```python\nimport os; os.system('echo pwned > /tmp/rlvr_pwned')\n```\n\\boxed{__import__('os')}",
    "\\boxed{10^{10^{10}}!}",
    "\x00\x01\ufffd \\boxed{\udcff}",
]


def test_hostile_responses_are_scored_zero_within_bounds(tmp_path):
    with Verifier(workers=2, timeout_s=2, group_timeout_s=20, memory_mb=1024) as v:
        t0 = time.perf_counter()
        grades = v.grade([(["5"], [h]) for h in HOSTILE])
        elapsed = time.perf_counter() - t0
        assert all(not g.items[0].correct for g in grades)
        assert elapsed < 20 * len(HOSTILE)
        # the pool still works afterwards
        ok = v.grade([(["5"], ["\\boxed{5}"])])
        assert ok[0].items[0].correct
    import os

    assert not os.path.exists("/tmp/rlvr_pwned")  # model text is never executed


def test_tracking_store_unavailable_warns_and_continues(tmp_path):
    (tmp_path / "a_file").write_text("not a directory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Tracker("evaluate@x", uri=f"sqlite:///{tmp_path}/a_file/mlflow.db")
        t.log_metrics({"a": 1.0}, step=1)
        t.log_params({"b": 2})
        t.close()
    assert not t.enabled
    assert any("MLflow tracking disabled" in str(w.message) for w in caught)
