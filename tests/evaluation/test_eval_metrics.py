import pytest

from rlvr.evaluation.metrics import mean_over, pass_at_k, pass_ks, summarize


def test_pass_at_k_hand_values():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # k=1 is the plain success rate
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


def test_pass_at_k_edges():
    assert pass_at_k(4, 0, 4) == 0.0  # c = 0
    assert pass_at_k(4, 4, 1) == 1.0  # c = n
    assert pass_at_k(4, 1, 4) == 1.0  # n = k with one correct
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(6, 3, 4) == 1.0  # n - c < k: every draw holds a correct one
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_pass_ks():
    assert pass_ks(1) == [1]
    assert pass_ks(4) == [1, 2, 4]
    assert pass_ks(6) == [1, 2, 4, 6]
    assert pass_ks(16) == [1, 2, 4, 8, 16]


def test_summarize_hand_computed():
    correct = [[True, False, False, False], [True, True, True, True], [False] * 4]
    majority = [False, True, False]
    m = summarize(correct, majority)
    assert m["avg@4"] == pytest.approx(5 / 12)
    assert m["pass@1"] == pytest.approx(5 / 12)
    # pass@2: problem 1 -> 0.5, problem 2 -> 1, problem 3 -> 0
    assert m["pass@2"] == pytest.approx(1.5 / 3)
    assert m["pass@4"] == pytest.approx(2 / 3)
    assert m["maj@4"] == pytest.approx(1 / 3)
    assert m["n_problems"] == 3


def test_summarize_rejects_ragged():
    with pytest.raises(ValueError):
        summarize([[True], [True, False]], [True, False])


def test_mean_over_is_unweighted():
    m = mean_over({"a": {"avg@4": 1.0, "n_problems": 10}, "b": {"avg@4": 0.0, "n_problems": 1000}})
    assert m["avg@4"] == 0.5
    assert m["n_problems"] == 1010
