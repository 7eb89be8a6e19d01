"""What stage 4 returns: `TrainingResult` (`fit_sequential_model`, `train_sequential_model`)."""

from __future__ import annotations

import dataclasses

from rl755.common.results import Result


@dataclasses.dataclass(frozen=True)
class TrainingResult(Result):
    """What a stage-4 training call did. A call that found the run already trained as far as
    asked sets only `start_step`, `step`, `train_losses` (empty), `last_terms`, `validation`
    and `checkpoint`; the dict interface (`result["key"]`) leaves the others out, as the dict
    this replaces did.

    Attributes:
      start_step: the step the call started from (0, or a resumed checkpoint's).
      step: the step it ended at.
      train_losses: the loss of each step of this call.
      validation: the last validation's losses {term: value} (empty without validation).
      checkpoint: the newest checkpoint's weights file, or None.
      last_terms: the last step's loss terms {term: value}.
      replicas: devices the batch was split over.
      batch_shards: parts of each replica's batch computed as separate calls.
      step_seconds: the wall time of each step of this call.
      learning_rate: the rate of the next update.
      gradient_norms: each step's global gradient norm before clipping (with `clip_norm`).
    """

    start_step: int
    step: int
    train_losses: list[float]
    validation: dict
    checkpoint: str | None
    last_terms: dict = dataclasses.field(default_factory=dict)
    replicas: int | None = None
    batch_shards: int | None = None
    step_seconds: list[float] | None = None
    learning_rate: float | None = None
    gradient_norms: list[float] | None = None

    omit_none = True  # the dict this replaces had no key for what a call did not do
