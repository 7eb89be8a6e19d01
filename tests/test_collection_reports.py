"""What stage 1 reports besides its shards: the shard check's progress bar, the progress
counts its workers send, and the road statistic of a CarRacing policy."""

import os

import numpy as np
import pytest

from rl755.common import sharded_io
from rl755.data_gen import corrupted
from rl755.data_gen.policy_stats import car_racing_road_fraction
from rl755.data_gen.progress import ProgressCounts


def test_the_shard_check_counts_files_on_its_progress_bar(tmp_path, capsys):
    for i in range(2):
        path = os.path.join(tmp_path, sharded_io.shard_name("rollouts-train", i, 2))
        sharded_io.write_tfrecord(path, [b"record"], "GZIP")
    assert corrupted.find_corrupted_tfrecords(str(tmp_path / "*.tfrecord-*")) == ([], 2)
    err = capsys.readouterr().err
    assert "checking: 100%" in err and "2/2" in err and "file/s" in err, err
    corrupted.find_corrupted_tfrecords(str(tmp_path / "*.tfrecord-*"), progress=False)
    assert capsys.readouterr().err == ""


def test_progress_counts_start_empty_and_keep_the_last_count_per_task():
    counts = ProgressCounts()
    assert counts.get() == {}  # read by the driver before any worker reports
    counts.set("task-0", 2)
    counts.set("task-1", 1)
    counts.set("task-0", 5)
    assert counts.get() == {"task-0": 5, "task-1": 1}


def _frames_with_patch(colour, n=1):
    frames = np.zeros((n, 96, 96, 3), np.uint8)
    frames[:, 56:64, 44:52] = colour
    return frames


@pytest.mark.parametrize(
    "colour, road",
    [
        ((105, 105, 105), True),  # the road's grey
        ((81, 81, 81), True), ((80, 80, 80), False),  # too dark: not road
        ((129, 129, 129), True), ((130, 130, 130), False),  # too light: not road
        ((100, 111, 100), True), ((100, 112, 100), False),  # too green
        ((100, 100, 111), True), ((100, 100, 112), False),  # too blue
        ((111, 100, 89), True), ((100, 111, 99), False),  # green next to red, blue next to green
        ((102, 204, 102), False),  # grass
    ],
)  # fmt: skip
def test_road_ahead_is_grey_of_the_roads_brightness(colour, road):
    assert car_racing_road_fraction(_frames_with_patch(colour)) == float(road)


def test_road_fraction_is_the_share_of_frames_mostly_road_ahead():
    frames = np.concatenate([_frames_with_patch((105, 105, 105), 3), _frames_with_patch(0, 1)])
    assert car_racing_road_fraction(frames) == 0.75
    half = _frames_with_patch((105, 105, 105))
    half[:, 56:60, 44:52] = 0  # half the patch: not "mostly" road
    assert car_racing_road_fraction(half) == 0.0
    half[:, 56, 44] = 105  # one pixel more than half
    assert car_racing_road_fraction(half) == 1.0
