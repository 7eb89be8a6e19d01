"""What a run of the infilling U-Net trains (`InfillConfig`), checked when it is made.

    config = InfillConfig(task="next_frame", context_frames=2, noise_size=8,
                          adversarial_weight=0.05, batch_size=32, train_steps=5000)

The flags of scripts/models/train_infilling_unet.py are its fields; unknown or out-of-range
values fail when the config is made, naming the flag.
"""

from __future__ import annotations

import dataclasses

from rl755.common.errors import BadInput
from rl755.models.infilling import data

RECONSTRUCTION_LOSSES = ("l2", "l1")


@dataclasses.dataclass(frozen=True)
class InfillConfig:
    """How the infilling U-Net is trained (scripts/models/train_infilling_unet.py's flags).

    Attributes:
      task: "next_frame" or "region" (rl755.models.infilling.data.TASKS).
      context_frames: K, frames before frame t the model sees.
      noise_size: N, size of the generator's noise vector (0: deterministic).
      use_actions: feed the actions a_{t-K} .. a_{t-1}.
      adversarial_weight: weight of the generator's GAN loss; 0 = reconstruction alone (no
        discriminator is built).
      reconstruction_weight: weight of the reconstruction loss.
      reconstruction_loss: "l2" or "l1".
      mode_seeking_weight: weight of MSGAN's mode-seeking term (0: off; costs a second
        generator pass per step).
      batch_size: windows per step.
      learning_rate: Adam learning rate of the generator.
      discriminator_learning_rate: of the discriminator (None: learning_rate).
      train_steps: total steps (including those of earlier runs).
      save_every_n_steps: checkpoint, validate and draw pictures this often.
      validation_steps: validation batches per save (0: none).
      log_every_n_steps: progress lines and TensorBoard points (None: min(100, save every)).
      num_draws: draws per validation example for the diversity measure (>= 2).
      seed: weight initialization, and with the step the masks and noise.
    """

    task: str = "next_frame"
    context_frames: int = 2
    noise_size: int = 8
    use_actions: bool = True
    adversarial_weight: float = 0.0
    reconstruction_weight: float = 1.0
    reconstruction_loss: str = "l2"
    mode_seeking_weight: float = 0.0
    batch_size: int = 32
    learning_rate: float = 2e-4
    discriminator_learning_rate: float | None = None
    train_steps: int = 1000
    save_every_n_steps: int = 500
    validation_steps: int = 4
    log_every_n_steps: int | None = None
    num_draws: int = 4
    seed: int = 0

    def __post_init__(self):
        data.check_task(self.task)
        if self.reconstruction_loss not in RECONSTRUCTION_LOSSES:
            raise BadInput(
                f"Unknown --reconstruction_loss {self.reconstruction_loss!r}; valid: "
                f"{', '.join(RECONSTRUCTION_LOSSES)}."
            )
        for name in ("context_frames", "batch_size", "train_steps", "save_every_n_steps"):
            if int(getattr(self, name)) <= 0:
                raise BadInput(f"--{name} must be a positive integer, got {getattr(self, name)}.")
        for name in ("noise_size", "validation_steps"):
            if int(getattr(self, name)) < 0:
                raise BadInput(f"--{name} must be >= 0, got {getattr(self, name)}.")
        for name in ("adversarial_weight", "reconstruction_weight", "mode_seeking_weight"):
            if not getattr(self, name) >= 0:
                raise BadInput(f"--{name} must be >= 0, got {getattr(self, name)}.")
        if not self.learning_rate > 0 or not (self.discriminator_learning_rate or 1) > 0:
            raise BadInput("--learning_rate and --discriminator_learning_rate must be > 0.")
        if self.num_draws < 2:
            raise BadInput(
                f"--num_draws must be >= 2 (a diversity needs two), got {self.num_draws}."
            )
        if self.mode_seeking_weight > 0 and self.noise_size == 0:
            raise BadInput("--mode_seeking_weight needs noise: set --noise_size > 0.")

    @property
    def adversarial(self) -> bool:
        return self.adversarial_weight > 0
