"""Shipping rules that need no trained model: flag differences between a run and its zoo row,
weights beyond float16, the repository's shipped models within the size limit, and a
controller's training directories read from its model names."""

import json

import h5py
import numpy as np
import pytest

from rl755 import zoo
from rl755.common.errors import BadInput
from rl755.zoo import ship, shipped

ENV = "FAKE_PIXELS"
ENCODER, SEQUENTIAL, CONTROLLER = (
    "raw_rollout_vae_4ld",
    "mdn_rnn_vae_4ld",
    "linear_controller_vae_mdn_rnn",
)


def test_flag_differences_compare_values_not_spellings():
    row = zoo.get(ENV, SEQUENTIAL)  # --train_steps=200 ... --sample_observations
    same = {"train_steps": 200, "batch_size": 8, "sequence_length": 8, "save_every_n_steps": 100}
    same.update(rollouts_dataset="RawRolloutVae4ld", sample_observations=True, other=1)
    assert ship.flag_differences(row, same) == []
    assert ship.flag_differences(row, dict(same, sample_observations=False, batch_size=9)) == [
        "--batch_size=8 (run: 9)",
        "--sample_observations= (run: False)",
    ]
    assert ship.flag_differences(zoo.get(ENV, ENCODER), {"learning_rate": 0.003}) == []


def test_flag_differences_read_rows_as_the_shell_and_model_dirs_as_their_rows(monkeypatch):
    monkeypatch.setenv("RL755_DATA_DIR", "/data/here")
    row = zoo.ZooModel(
        "pattern_row",
        ENV,
        zoo.SEQUENTIAL,
        "mdn_rnn.mdn_rnn",
        '--rollouts_pattern="$RL755_DATA_DIR/fake/encoded*/encoded-{split}-*"',
        "a row with a data path",
    )
    ran = "/data/here/fake/encoded*/encoded-{split}-*"
    assert ship.flag_differences(row, {"rollouts_pattern": ran}) == []
    assert ship.flag_differences(row, {"rollouts_pattern": "/elsewhere/x"}) == [
        "--rollouts_pattern=/data/here/fake/encoded*/encoded-{split}-* (run: /elsewhere/x)"
    ]
    controller = zoo.get(ENV, CONTROLLER)
    assert controller.flag_values()["sequential_model"] == SEQUENTIAL
    by_dir = {"sequential_model": "none", "sequential_model_dir": "/models/seq"}
    assert ship.flag_differences(controller, by_dir) == []
    assert ship.flag_differences(controller, dict(by_dir, sequential_model_dir=None)) == [
        f"--sequential_model={SEQUENTIAL} (run: none)"
    ]


def test_weights_beyond_float16_are_refused_not_shipped_as_inf(tmp_path):
    src, dst = tmp_path / "w.weights.h5", tmp_path / "half.weights.h5"
    with h5py.File(src, "w") as f:
        f["layers/dense/vars/0"] = np.array([[1.0, -7e4], [0.5, 2.0]], np.float32)
    with pytest.raises(BadInput, match=r"layers/dense/vars/0 reach 70000, beyond float16"):
        ship.write_float16_weights(str(src), str(dst))
    with h5py.File(src, "w") as f:  # the largest float16 still ships, exactly
        f["layers/dense/vars/0"] = np.array([65504.0, -1.0], np.float32)
    stats = ship.write_float16_weights(str(src), str(dst))
    with h5py.File(dst, "r") as f:
        np.testing.assert_array_equal(f["layers/dense/vars/0"][()], [65504.0, -1.0])
    assert stats["max_abs_value"] == 65504.0 and stats["max_abs_error"] == 0.0
    assert (stats["arrays"], stats["values"]) == (1, 2)


def test_the_repositorys_shipped_models_are_rows_within_the_size_limit():
    assert shipped.folder_size(shipped.PACKAGE_ROOT) <= shipped.SIZE_LIMIT_BYTES
    for folder, name in shipped.shipped_rows(shipped.PACKAGE_ROOT):
        record = json.loads(
            (shipped.PACKAGE_ROOT / folder / name / shipped.RECORD_FILE).read_text()
        )
        row = zoo.get(record["environment"], name)
        assert row.folder_name == folder and row.kind == record["kind"]
        assert row.flags == record["flags"], f"{name}: its row's flags changed since it shipped"


def test_a_controllers_training_dirs_are_read_from_its_model_names():
    assert ship._dir_of("dir:/runs/mdn") == "/runs/mdn"
    assert ship._dir_of("dir:vae.Vae:32:/runs/vae") == "/runs/vae"
    assert ship._dir_of("dir:/runs/a:b") == "/runs/a:b"  # a colon in a plain dir stays
    assert ship._dir_of("mdn_rnn_64ld") is None
