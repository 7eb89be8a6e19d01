"""What a CMA-ES controller training run is asked to do (`CmaConfig`), where its real
episodes run (`PoolConfig`), and the seeds it derives (rl755.controller.cma_train)."""

from __future__ import annotations

import dataclasses

import numpy as np

from rl755.common import checkpoints

MODES = ("real", "dream")
EVAL_PLACES = ("real", "dream")  # where evaluations and the final selection play (eval_in)


def derived_seeds(seed: int, *key: int, n: int) -> np.ndarray:
    """n reproducible 31-bit seeds for (seed, *key)."""
    return np.random.SeedSequence([seed, *key]).generate_state(n) % (2**31 - 1)


def trial_seeds(seed: int, generation: int, trials: int) -> np.ndarray:
    """The reset seeds of a generation's trials, shared by all members: [T]."""
    return derived_seeds(seed, 1, generation, n=trials)


def eval_seeds(seed: int, episodes: int) -> np.ndarray:
    """Fixed seeds of the periodic real evaluation (the same every time): [E]."""
    return derived_seeds(seed, 2, n=episodes)


def selection_seeds(seed: int, episodes: int) -> np.ndarray:
    """Seeds of the final selection's episodes (`CmaConfig.select_episodes`), none of them
    an evaluation's: [S]."""
    return derived_seeds(seed, 7, n=episodes)


@dataclasses.dataclass
class CmaConfig:
    """Attributes:
    mode: "real" (episodes in the environment) or "dream" (inside the sequential model).
    population_size: P, CMA-ES population.
    trials_per_member: T, episodes per member per generation.
    generations: total generations (a resumed run continues up to this number).
    rollout_max_steps: step limit per episode (real and dream).
    sigma: CMA-ES initial step size.
    seed: base seed (trial seeds, CMA-ES sampling, eval seeds).
    temperature: dream sampling temperature.
    done_threshold: dream episode ends: 0 draws Bernoulli(done_prob) each step; p > 0 ends an
      episode as soon as done_prob > p (World Models' Doom dream ~ 0.09 with an unweighted
      head; rl755.controller.dream_eval).
    done_prob_scale: the dream's episode-end probability is multiplied by this before either
      rule (mode "dream" only); > 1 makes a dream that under-predicts ends harsher.
    dream_disagreement_penalty: with a dream ensemble (`run_cma_es(dream_ensemble=...)`), the
      dream's reward is the members' mean minus this times their std (rl755.controller.dream_eval).
    eval_every: evaluation (`eval_in`) of the generation's best member and of the CMA-ES mean every
      this many generations (0: never); the saved controller is the best evaluated one.
    eval_episodes: episodes of that evaluation.
    eval_in: where the evaluations and the final selection play: "real" episodes (on
      `eval_seeds` / `selection_seeds`), or "dream" (mode "dream" only): dreams from the
      training's initial states `seed % dream_initial_states`, drawn with a fixed dream seed
      (the first of those seeds), so a dream controller is trained and chosen without a real
      episode, as in World Models.
    dream_initial_states: K real reset frames encoded as dream starting points.
    initial_params: a controller to start from: its `controller_params.npy`, or the
      directory (a trained controller's model_dir) holding one. CMA-ES's mean starts there
      instead of at 0; a resumed run ignores it (its checkpoint holds the mean).
    select_episodes: S > 0: when the run has its `generations`, the `select_top` candidates
      with the best evaluations play S more episodes each (`eval_in`), on seeds no evaluation
      used (`selection_seeds`), and the saved controller is the best of them on those: a
      choice among noisy `eval_episodes`-episode means alone is winner's-cursed. 0: off.
    select_top: K, how many of the evaluated candidates the selection replays.
    keep_checkpoints: the newest CMA-ES checkpoints kept (each holds the whole history and
      every evaluated candidate, so the newest alone resumes and selects).
    """

    mode: str = "real"
    population_size: int = 64
    trials_per_member: int = 16
    generations: int = 100
    rollout_max_steps: int = 1000
    sigma: float = 0.1
    seed: int = 0
    temperature: float = 1.0
    done_threshold: float = 0.0
    done_prob_scale: float = 1.0
    dream_disagreement_penalty: float = 0.0
    eval_every: int = 25
    eval_episodes: int = 16
    eval_in: str = "real"
    dream_initial_states: int = 256
    initial_params: str | None = None
    select_episodes: int = 0
    select_top: int = 4
    keep_checkpoints: int = checkpoints.KEEP_CHECKPOINTS

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"Unknown --mode {self.mode!r}; valid: {', '.join(MODES)}.")
        for name in (
            "population_size",
            "trials_per_member",
            "generations",
            "rollout_max_steps",
            "keep_checkpoints",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.population_size < 2:
            raise ValueError("CMA-ES needs population_size >= 2.")
        if not 0.0 <= self.done_threshold < 1.0:
            raise ValueError(f"done_threshold must be in [0, 1), got {self.done_threshold}.")
        if not self.done_prob_scale > 0:
            raise ValueError(f"done_prob_scale must be > 0, got {self.done_prob_scale}.")
        if self.done_prob_scale != 1.0 and self.mode != "dream":
            raise ValueError("--done_prob_scale scales the dream's episode ends: use --mode=dream.")
        if self.dream_disagreement_penalty < 0:
            raise ValueError(
                "dream_disagreement_penalty must be >= 0, got "
                f"{self.dream_disagreement_penalty}."
            )
        if self.sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}.")
        if self.select_episodes < 0 or self.select_top < 1:
            raise ValueError(
                f"select_episodes must be >= 0 and select_top >= 1, got {self.select_episodes} "
                f"and {self.select_top}."
            )
        if self.eval_in not in EVAL_PLACES:
            raise ValueError(
                f"Unknown --eval_in {self.eval_in!r}; valid: {', '.join(EVAL_PLACES)}."
            )
        if self.eval_in == "dream" and self.mode != "dream":
            raise ValueError(
                "--eval_in=dream evaluates inside the sequential model: it needs --mode=dream "
                "(a real-mode run evaluates in real episodes)."
            )
        if self.select_episodes and self.eval_every <= 0:
            raise ValueError(
                "--select_episodes replays the candidates of the evaluations: give "
                "--eval_every > 0 too."
            )

    def evaluates_at(self, generation: int) -> bool:
        """Whether the best member plays evaluation episodes after `generation` (1-based)."""
        return self.eval_every > 0 and (
            generation % self.eval_every == 0 or generation == self.generations
        )


@dataclasses.dataclass
class PoolConfig:
    """How real episodes run. Attributes:
    parallelism: Ray actors (0: one in-process worker, no Ray).
    envs_per_worker: environments stepped together (batched networks) per worker.
    ray_address: join an existing Ray cluster ("auto", "host:port"), else start one locally.
    trial_timeout_s: a batch of episodes not done in this time is re-run on a new worker.
    startup_timeout_s: extra time for a new worker's first batch (imports, network build).
    max_worker_failures: failures of one batch before the run stops with an error.
    threads_per_worker: TF/OMP threads (and Ray CPUs) per worker.
    """

    parallelism: int = 0
    envs_per_worker: int = 4
    ray_address: str | None = None
    trial_timeout_s: float = 600.0
    startup_timeout_s: float = 300.0
    max_worker_failures: int = 3
    threads_per_worker: int = 1

    def evaluator_kwargs(self) -> dict:
        """These settings as keyword arguments of `rl755.controller.real_eval.RealEvaluator`
        (the same names, but `max_worker_failures` is its `max_failures`)."""
        kwargs = dataclasses.asdict(self)
        kwargs["max_failures"] = kwargs.pop("max_worker_failures")
        return kwargs
