"""The stage entry points return typed results: attributes as the docs show them, and the old
dict interface (`result["key"]`) for callers written when they returned dicts."""

import glob
import inspect
import json
import os

import pytest

from rl755.common.results import Result
from rl755.controller.results import EpisodeStats, EvaluationResult
from rl755.data_gen.collect import CollectionSummary, collect_rollouts


def test_an_evaluation_json_reads_back_as_the_result_it_was_written_from(repo_root):
    [path] = glob.glob(
        os.path.join(repo_root, "experiments/car_racing/real_controller/evaluation_100/*1000-*")
    )
    with open(path) as f:
        data = json.load(f)
    result = EvaluationResult.from_dict(data)
    assert result.to_dict() == data  # what evaluation.json holds, key for key
    assert isinstance(result.random_policy, EpisodeStats)
    assert result.mean == data["mean"] and result.returns == data["returns"]
    assert result.random_policy.std == data["random_policy"]["std"]
    # the dict interface of old callers
    assert result["mean"] == data["mean"]
    assert result["random_policy"]["mean"] == data["random_policy"]["mean"]
    assert set(result) == set(data) and result.get("nope", 7) == 7


def test_a_training_result_keeps_every_key_of_the_dict_it_replaces():
    from rl755.controller.results import TrainingResult

    result = TrainingResult(3, 1.5, [0.0], [], [], None, "/m")
    assert result["selection"] is None and "selection" in result  # the dict had the key
    assert result.to_dict()["model_dir"] == "/m" and result["generation"] == 3


def test_unset_fields_read_as_absent_keys():
    result = EvaluationResult.from_dict(
        dict(
            environment="FAKE_PIXELS",
            controller="LinearController",
            encoder="none",
            sequential_model="none",
            num_episodes=1,
            seeds=[3],
            max_steps=5,
            returns=[1.0],
            steps=[5],
            mean=1.0,
            std=0.0,
            min=1.0,
            max=1.0,
        )
    )
    assert "random_policy" not in result and result.random_policy is None
    with pytest.raises(KeyError):
        result["out_dir"]
    assert "out_dir" not in result.to_dict()
    with pytest.raises(TypeError):
        EvaluationResult.from_dict({**result.to_dict(), "unknown": 1})


def test_collect_rollouts_returns_its_summary(tmp_path):
    summary = collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=3, parallelism=1, max_steps=6,
        out_dir=str(tmp_path), out_format="tfrecord", seed=4, progress=False,
    )  # fmt: skip
    assert isinstance(summary, CollectionSummary)
    assert (summary.rollouts, summary.written, summary.skipped, summary.seed) == (3, 3, 0, 4)
    assert summary.out_dir == str(tmp_path) and all(os.path.exists(f) for f in summary.files)
    assert summary["frames"] == summary.frames == 3 * 6  # one per step
    again = collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=3, parallelism=1, max_steps=6,
        out_dir=str(tmp_path), out_format="tfrecord", seed=4, progress=False,
    )  # fmt: skip
    assert (again.written, again.skipped, again.rollouts) == (0, 3, 0)


@pytest.mark.parametrize(
    "module,function",
    [
        ("rl755.data_gen.collect", "collect_rollouts"),
        ("rl755.data_gen.encode", "encode_raw_rollouts"),
        ("rl755.controller.evaluate", "evaluate_controller"),
        ("rl755.controller.evaluate", "score_controller"),
        ("rl755.controller.cma_train", "train_controller"),
        ("rl755.controller.cma_train", "run_cma_es"),
        ("rl755.models.encoders.train", "train_obs_encoder"),
        ("rl755.models.sequential.train", "train_sequential_model"),
        ("rl755.models.sequential.loop", "fit_sequential_model"),
    ],
)
def test_entry_points_declare_a_typed_result(module, function):
    """The API reference shows the return type; it must be a documented Result dataclass."""
    import importlib

    fn = getattr(importlib.import_module(module), function)
    returned = inspect.signature(fn, eval_str=True).return_annotation
    assert inspect.isclass(returned) and issubclass(returned, Result), (function, returned)
    assert returned.__doc__ and "Attributes:" in returned.__doc__, returned
