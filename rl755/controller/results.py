"""What the stage-5 entry points return: typed results (`rl755.common.results.Result`).

result = evaluate_controller(controller_dir="runs/ctrl", num_episodes=100, seed=0,
                             compare_random=True)
result.mean, result.std            # the controller's returns
result.random_policy.mean          # the random policy's, on the same seeds
result.to_dict()                   # what <out_dir>/evaluation.json holds
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rl755.common.results import Result


@dataclasses.dataclass(frozen=True)
class EpisodeStats(Result):
    """Returns of a policy over fixed-seed episodes.

    Attributes:
      returns: each episode's return, in seed order [E].
      steps: each episode's length in steps [E].
      mean: mean return.
      std: standard deviation of the returns (ddof 0).
      min: lowest return.
      max: highest return.
    """

    returns: list[float]
    steps: list[int]
    mean: float
    std: float
    min: float
    max: float


@dataclasses.dataclass(frozen=True)
class EvaluationResult(Result):
    """A controller's evaluation (`evaluate_controller`, `score_controller`); its `to_dict()`
    is `<out_dir>/evaluation.json`.

    Attributes:
      environment: the `Environments` name.
      controller: the controller class, e.g. "LinearController".
      encoder: the encoder's zoo name or directory ("none": pixels).
      sequential_model: the sequential model's name or directory ("none": V only).
      num_episodes: E.
      seeds: episode i's reset seed, `seed + i` [E].
      max_steps: the step limit of an episode.
      returns: each episode's return [E].
      steps: each episode's length [E].
      mean: mean return.
      std: standard deviation of the returns (ddof 0).
      min: lowest return.
      max: highest return.
      random_policy: the uniform random policy on the same seeds (None unless
        `compare_random`).
      controller_dir: the controller's directory (None from `score_controller`).
      controller_source: "trained", "shipped" or "dir" (None from `score_controller`).
      out_dir: where evaluation.json and episode.gif are (None from `score_controller`).
      controller_generation: the CMA-ES generation the controller comes from, when known.
      params_sha256: SHA-256 of the controller's float32 parameters (a rerun of the same
        evaluation finds it done by this and the fields above).
    """

    environment: str
    controller: str
    encoder: str | None
    sequential_model: str | None
    num_episodes: int
    seeds: list[int]
    max_steps: int
    returns: list[float]
    steps: list[int]
    mean: float
    std: float
    min: float
    max: float
    random_policy: EpisodeStats | None = None
    controller_dir: str | None = None
    controller_source: str | None = None
    out_dir: str | None = None
    controller_generation: int | None = None
    params_sha256: str | None = None

    omit_none = True  # evaluation.json has no key for what is not there

    @classmethod
    def from_dict(cls, result: dict) -> EvaluationResult:
        """From the dict of an evaluation.json (unknown keys fail)."""
        fields = dict(result)
        if fields.get("random_policy") is not None:
            fields["random_policy"] = EpisodeStats(**fields["random_policy"])
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class TrainingResult(Result):
    """What a CMA-ES run did (`train_controller`, `run_cma_es`); its files are in `model_dir`.

    Attributes:
      generation: the last generation trained (counting earlier runs of the model dir).
      best_fitness: the best member's training fitness over all generations.
      best_params: the parameters saved as the trained controller [N] (the final selection's
        choice, else the best evaluated candidate, else the best member by training fitness).
      history: one dict per generation (fitness mean, best, worst, sigma, steps, ...).
      evals: one dict per evaluation of a candidate (generation, which, mean, std, ...).
      selection: the final selection's replays (`--select_episodes`), or None.
      model_dir: the run's directory (checkpoints, controller.json, summary.json).
      es: the CMA-ES object at the end (`cma.CMAEvolutionStrategy`), to go on from in code.
    """

    generation: int
    best_fitness: float
    best_params: Any
    history: list[dict]
    evals: list[dict]
    selection: dict | None
    model_dir: str
    es: Any = dataclasses.field(default=None, repr=False)
