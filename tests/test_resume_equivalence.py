"""Every resumable stage, killed at several points (between a checkpoint's files too) and run
again, ends as an uninterrupted run with the same seed ends (tests/resume_equivalence.py)."""

import pytest
from resume_equivalence import STAGES, check_resume_equivalence


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_a_killed_stage_resumes_to_the_uninterrupted_result(stage, tmp_path):
    points = check_resume_equivalence(stage, tmp_path)
    assert len(points) >= 3, points
