"""Loading a trained sequential model by environment and catalogue name (the zoo's loader).

    model = load_sequential_model("CAR_RACING", "mdn_rnn.mdn_rnn", model_dir)
    h, state = model.step(z, a, model.initial_state(1))     # z [1, Z], a [1, A] -> h [1, H]

The newest complete checkpoint of `model_dir` is loaded into the catalogue's model for that
environment (rl755.models.catalogue); `difference_targets` comes from the checkpoint's
marker (rl755.common.checkpoints). A missing model fails with `how_to_train`.
"""

from __future__ import annotations


def load_sequential_model(environment, model: str, model_dir: str, how_to_train: str | None = None):
    from rl755.models import catalogue
    from rl755.models.sequential.train import load_trained_model

    model_fn = catalogue.model_fn(environment, model, kind=catalogue.SEQUENTIAL)
    try:
        return load_trained_model(model_dir, model_fn)
    except FileNotFoundError as e:
        if how_to_train is None:
            raise
        raise FileNotFoundError(f"{e} Train it first: {how_to_train}") from e
