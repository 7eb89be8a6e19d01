"""Dataset classes by environment and `--rollouts_dataset` name, for ANY environment.

    RawRollouts = raw_rollouts_class("CAR_RACING")       # stage 1 output, stage 2 input
    ds = RawRollouts().rollouts_ds("train")               # {"observations": uint8 [T, 96, 96, 3], ...}
    cls = encoded_rollouts_class("CAR_RACING", "RawRolloutVae32ld")   # stage 3 output
    ds = cls().get_autoregressive_slices(32)              # {"inputs": [32, Z + A], ...}

Encoded datasets are derived from the zoo's encoder rows: `<EncoderNameInCamelCase>` reads
`<data_dir>/<env folder>/encoded_rollouts/<encoder name>/encoded-{split}*.tfrecord-*` (where
scripts/data_gen/encode_raw_rollouts.py --model=<encoder name> writes), with Z from the row.
`VaeEncodedRollouts` reads `.../encoded_rollouts/vae/` (an --out_dir of your choice; Z from
its dataset_info.json). Unknown names fail at once, listing the valid ones. The classes are
made once per environment, so `rl755.data.<env>.raw_rollouts.RawRollouts` (the seed's
modules, now two-line shims) is the same class.
"""

from __future__ import annotations

import functools
import os

from rl755 import zoo
from rl755.common import sharded_io
from rl755.data.common.directories import EncodedRolloutsInDirectory, RawRolloutsInDirectory
from rl755.environments import Environment, Environments

VAE_ENCODED = "VaeEncodedRollouts"


def raw_rollouts_class(environment: Environment | str) -> type[RawRolloutsInDirectory]:
    """`RawRollouts` of `environment`: `RawRollouts(tfrecords_pattern=None)`."""
    return _raw_rollouts_class(Environments.from_name(environment))


@functools.cache
def _raw_rollouts_class(env: Environment) -> type[RawRolloutsInDirectory]:
    kind = "one-hot " if env.is_discrete else ""
    doc = (
        f"Raw rollouts of {env.name}, as scripts/data_gen/collect_rollouts.py "
        f"--environment={env.name} --out_format=tfrecord writes them:\n"
        f"`<data_dir>/{env.folder_name}/raw_rollouts/rollouts-{{split}}*.tfrecord-*`; "
        f"observations uint8 [T, {', '.join(map(str, env.observation_shape))}], actions "
        f"{kind}float32 [T, {env.action_size}]."
    )
    return type("RawRollouts", (RawRolloutsInDirectory,), _attrs(env, doc))


def encoded_rollouts_classes(environment: Environment | str) -> dict[str, type]:
    """{--rollouts_dataset name: class} of `environment`."""
    return dict(_encoded_rollouts_classes(Environments.from_name(environment)))


@functools.cache
def _encoded_rollouts_classes(env: Environment) -> tuple[tuple[str, type], ...]:
    classes = [
        (
            VAE_ENCODED,
            _encoded(
                env,
                VAE_ENCODED,
                "vae",
                None,
                f"{env.name} rollouts encoded by a VAE into `<data_dir>/{env.folder_name}/"
                "encoded_rollouts/vae/` (an --out_dir you chose); mean as observation, "
                "posterior std devs kept; Z from the directory's dataset_info.json.",
            ),
        )
    ]
    for row in zoo.rows(env, zoo.ENCODER):
        doc = (
            f"{env.name} rollouts encoded by the zoo's `{row.name}` (Z = "
            f"{row.representation_size}), in `<data_dir>/{env.folder_name}/encoded_rollouts/"
            f"{row.name}/encoded-{{split}}*.tfrecord-*`:\n\n    "
            f"python scripts/data_gen/encode_raw_rollouts.py --environment={env.name} "
            f"--model={row.name} --split=train   # and --split=validation\n"
        )
        classes.append(
            (row.dataset, _encoded(env, row.dataset, row.name, row.representation_size, doc))
        )
    return tuple(classes)


def encoded_rollouts_class(environment: Environment | str, name: str) -> type:
    """The `--rollouts_dataset` class `name` of `environment` (strict)."""
    env = Environments.from_name(environment)
    classes = encoded_rollouts_classes(env)
    if name not in classes:
        raise LookupError(
            f"Unknown rollouts dataset {name!r} for {env.name}. Valid --rollouts_dataset values: "
            f"{', '.join(classes)} (one per zoo encoder, rl755/zoo/rows.py)."
        )
    return classes[name]


def _attrs(env: Environment, doc: str) -> dict:
    # without __module__, ABCMeta's type() call would name the classes' module "abc"
    return {"ENVIRONMENT": env, "__doc__": doc, "__module__": __name__}


def _encoded(env: Environment, name: str, subdir: str, size: int | None, doc: str) -> type:
    attrs = dict(_attrs(env, doc), SUBDIR=subdir, REPRESENTATION_SIZE=size)  # OUT_NAME: the base's
    attrs["_missing_data_hint"] = _missing_encoded_hint
    return type(name, (EncodedRolloutsInDirectory,), attrs)


def _missing_encoded_hint(self: EncodedRolloutsInDirectory) -> str:
    """What the "no shards match" error of an encoded dataset adds: the encoded rollouts that
    are there, each with the --rollouts_dataset that reads it, and the flags to pass."""
    root = os.path.dirname(self.directory())
    by_subdir = {cls.SUBDIR: n for n, cls in encoded_rollouts_classes(self.environment).items()}
    found = []
    for subdir in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        directory = os.path.join(root, subdir)
        if sharded_io.list_shards(os.path.join(directory, f"{self.OUT_NAME}-*.tfrecord-*")):
            name = by_subdir.get(subdir)
            if name:
                found.append(f"{directory}: pass --rollouts_dataset={name}")
            else:
                here = os.path.join(directory, f"{self.OUT_NAME}-{{split}}*.tfrecord-*")
                found.append(f"{directory}: pass --rollouts_pattern='{here}' to read them")
    pattern = f"'<dir>/{self.OUT_NAME}-{{split}}*.tfrecord-*'"
    if found:
        return f"Encoded rollouts found in {'; in '.join(found)}."
    return (
        f"No encoded rollouts under {root}. Encode raw rollouts first, e.g. python "
        f"scripts/data_gen/encode_raw_rollouts.py --environment={self.environment.name} "
        "--model=<a zoo encoder> --split=train (and --split=validation), then pass its "
        f"--rollouts_dataset, or --rollouts_pattern={pattern}."
    )
