"""One list of grader names: the settings' (verifier.grader is checked against
it before anything runs) is the graders' own, each with both halves."""

import pytest

from rlvr.grading.graders import GROUP_GRADERS, HALVES
from rlvr.grading.pool import Verifier
from rlvr.settings.sections import GRADERS


def test_the_settings_name_every_grader_and_no_other():
    assert set(GROUP_GRADERS) == set(GRADERS)
    assert all(set(halves) == set(HALVES) for halves in GROUP_GRADERS.values())


def test_the_pool_refuses_a_name_the_settings_do_not_know():
    with pytest.raises(ValueError, match="unknown grader 'nope'"):
        Verifier(workers=1, grader="nope")
