"""The verdicts of a band and of a floor, at their edges."""


def test_band_and_floor_verdicts_at_their_edges():
    from rlvr.report.claim_stats import band_verdict, floor_verdict

    assert band_verdict(-0.1, 0.1, 0.1) == "supported" and band_verdict(-0.2, 0.0, 0.1) == "inconclusive"
    assert band_verdict(0.11, 0.3, 0.1) == "contradicted" and band_verdict(-0.3, -0.11, 0.1) == "contradicted"
    assert floor_verdict(-0.1, 5.0, 0.1) == "supported" and floor_verdict(-0.2, 0.0, 0.1) == "inconclusive"
    assert floor_verdict(-0.5, -0.11, 0.1) == "contradicted"
    assert floor_verdict(float("nan"), float("nan"), 0.1) == "inconclusive (too few points)"

