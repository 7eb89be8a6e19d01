"""Shipping a trained zoo model into the repository (scripts/dev/ship_model.py).

    record = ship_model("DOOM_TAKE_COVER", "raw_rollout_vae_64ld")  # from <models_dir>/...
    record = ship_model("FAKE_PIXELS", "mdn_rnn_vae_4ld", model_dir="runs/mdn", base=tmp_dir)
    record["size_bytes"], record["total_shipped_bytes"]

Writes `<shipped root>/<env folder>/<name>/` (layout in rl755.zoo.shipped):

- encoders and sequential models: the newest complete checkpoint of the model dir, weights
  cast to float16 (half the bytes; the largest error is recorded), the optimizer left out,
  under a checkpoint marker copied from the source's (model, Z, difference_targets, step...);
- controllers: controller.json and the parameters as float32 (what evaluation plays: a few
  thousand numbers, so nothing is gained by float16 and the returns stay exactly the same).
  A controller ships after its encoder and sequential model (its row's --encoder and
  --sequential_model, which its controller.json must name, or name the training dirs those
  shipped copies came from: --encoder_dir / --sequential_model_dir runs ship too, renamed to
  the rows), and loads with those shipped copies.

Plus `shipped.json`: the row, the source (model dir, checkpoint, the run's code version from
its runs/*.json, with its flags), the row's flags that the run set otherwise
(`flags_differ`: update the row), the conversion's error, the sizes, and the export's own run
(time, code version, host). The folder is written under a temporary name, loaded back through the
row's loader, and renamed into place, replacing an older copy; nothing is left behind on
failure. Shipping fails (`BadInput`, saying what to do) when the source has no complete checkpoint,
when the name is not a row of the environment, when the checkpoint is not what the row
describes, or when all shipped models would exceed `SIZE_LIMIT_BYTES`.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import socket
import sys
from pathlib import Path

from rl755.common import checkpoints, run_record, sharded_io
from rl755.common.errors import BadInput
from rl755.zoo import shipped
from rl755.zoo.entry import CONTROLLER, ENCODER

FLOAT16_MAX = 65504.0


def ship_model(
    environment: str, name: str, model_dir: str | None = None, base: str | None = None
) -> dict:
    """Ships the zoo row `name` of `environment` from `model_dir` (default: the row's
    `<models_dir>/<env folder>/<name>`) into `base` (default: rl755.zoo.shipped.root()).
    Returns the written shipped.json, plus "path" and "total_shipped_bytes"."""
    from rl755 import zoo

    try:
        row = zoo.get(environment, name)
    except LookupError as e:
        raise BadInput(f"{e} Only zoo rows ship: add a row first.") from None
    model_dir = os.path.abspath(os.path.expanduser(str(model_dir or row.model_dir())))
    base = Path(base or shipped.root()).expanduser().resolve()
    final = shipped.shipped_dir(row, base)
    created = [p for p in (base, final.parent) if not p.exists()]
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(sharded_io.tmp_path_for(str(final)))
    tmp.mkdir()
    try:
        if row.kind == CONTROLLER:
            details = _export_controller(row, model_dir, tmp, base)
        else:
            details = _export_weights(row, model_dir, tmp)
        row.load_from(str(tmp))  # it loads, through the same loader as a shipped row
        details["files"] = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        record = _record(row, model_dir, details)
        sharded_io.write_json_atomic(str(tmp / shipped.RECORD_FILE), record)
        size = shipped.folder_size(tmp)
        others = shipped.folder_size(base) - (shipped.folder_size(final) if final.exists() else 0)
        if others + size > shipped.SIZE_LIMIT_BYTES:
            raise BadInput(
                f"Shipping {row.environment} {row.name} ({size / 1e6:.2f} MB) would bring the "
                f"shipped models in {base} to {(others + size) / 1e6:.2f} MB, over the "
                f"{shipped.SIZE_LIMIT_BYTES / 1e6:.0f} MB limit (rl755.zoo.shipped."
                "SIZE_LIMIT_BYTES). Remove a shipped model (git rm -r its folder) first."
            )
        _replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for path in reversed(created):
            with contextlib.suppress(OSError):
                path.rmdir()  # only if still empty
        raise
    return dict(record, path=str(final), size_bytes=size, total_shipped_bytes=others + size)


def _no_model(row, model_dir: str, what: str) -> BadInput:
    return BadInput(
        f"{model_dir} holds no {what}: nothing to ship for {row.environment} {row.name}. "
        f"Train it first ({row.how_to_train(model_dir)}), or pass --model_dir=<the training "
        "run's --model_dir>."
    )


def _export_weights(row, model_dir: str, out: Path) -> dict:
    """The newest complete checkpoint's weights as float16, under a copy of its marker."""
    ckpt = checkpoints.newest_complete_checkpoint(model_dir)
    if ckpt is None or not ckpt.weights_path:
        raise _no_model(
            row,
            model_dir,
            "complete checkpoint (a model-NNN.json marker and the weights file it lists)",
        )
    wants = {"environment": row.environment, "model": row.model}
    if row.kind == ENCODER:
        wants["representation_size"] = row.representation_size
    for key, want in wants.items():
        if key in ckpt.info and ckpt.info[key] != want:
            raise BadInput(
                f"{model_dir}: its newest checkpoint ({checkpoints.marker_name(ckpt.number)}) "
                f"was trained with {key}={ckpt.info[key]!r}, but the zoo row {row.name} says "
                f"{want!r}. Ship the right --model_dir, or fix the row in rl755/zoo/rows.py."
            )
    info = {k: v for k, v in ckpt.info.items() if k not in ("files", "checkpoint_number")}
    conversion = {}

    def write(path: str) -> None:
        conversion.update(write_float16_weights(ckpt.weights_path, path))

    checkpoints.write_checkpoint(str(out), ckpt.number, {"weights": (".weights.h5", write)}, info)
    return {
        "dtype": "float16",
        "checkpoint_number": ckpt.number,
        "step": ckpt.step,
        "conversion": conversion,
    }


def write_float16_weights(src: str, dst: str) -> dict:
    """Copies a Keras `.weights.h5` without its optimizer, floating arrays as float16.

    Returns {"arrays", "values", "max_abs_value", "max_abs_error"} (the error of the cast)."""
    import h5py
    import numpy as np

    stats = {"arrays": 0, "values": 0, "max_abs_value": 0.0, "max_abs_error": 0.0}
    with h5py.File(src, "r") as fin, h5py.File(dst, "w") as fout:
        for key, value in fin.attrs.items():
            fout.attrs[key] = value

        def copy(name, obj):
            if name.split("/")[0] == "optimizer":
                return
            if isinstance(obj, h5py.Group):
                group = fout.require_group(name)
                for key, value in obj.attrs.items():
                    group.attrs[key] = value
                return
            data = obj[()]
            if np.issubdtype(np.asarray(data).dtype, np.floating):
                data = np.asarray(data)
                peak = float(np.abs(data).max()) if data.size else 0.0
                if not np.isfinite(peak) or peak > FLOAT16_MAX:
                    raise BadInput(
                        f"{src}: weights {name} reach {peak:g}, beyond float16 "
                        f"(|x| <= {FLOAT16_MAX:g}); this model cannot ship as float16."
                    )
                half = data.astype(np.float16)
                error = np.abs(half.astype(np.float64) - data.astype(np.float64))
                stats["arrays"] += 1
                stats["values"] += int(data.size)
                stats["max_abs_value"] = max(stats["max_abs_value"], peak)
                stats["max_abs_error"] = max(
                    stats["max_abs_error"], float(error.max()) if data.size else 0.0
                )
                data = half
            dataset = fout.create_dataset(name, data=data)
            for key, value in obj.attrs.items():
                dataset.attrs[key] = value

        fin.visititems(copy)
    return stats


def _export_controller(row, model_dir: str, out: Path, base: Path) -> dict:
    """controller.json as it is, parameters as float32; its models must be shipped already."""
    import numpy as np

    from rl755 import zoo

    meta_file, params_file = shipped.CONTROLLER_FILES
    if not all(os.path.exists(os.path.join(model_dir, f)) for f in shipped.CONTROLLER_FILES):
        raise _no_model(row, model_dir, f"trained controller ({meta_file} + {params_file})")
    with open(os.path.join(model_dir, meta_file)) as f:
        meta = json.load(f)
    params = np.load(os.path.join(model_dir, params_file))
    if meta.get("environment") != row.environment:
        raise BadInput(
            f"{model_dir}/{meta_file} holds a controller for {meta.get('environment')}, not "
            f"{row.environment}."
        )
    if not np.all(np.isfinite(params)):
        raise BadInput(f"{model_dir}/{params_file} holds non-finite parameters.")
    flags, reads, shipped_sources = row.flag_values(), {}, {}
    for key in ("encoder", "sequential_model"):
        want, got = flags.get(key, "none"), meta.get(key, "none")
        if got == want or (want != "none" and _dir_of(got)):
            continue  # a training dir ("dir:...") is checked against the shipped copy below
        raise BadInput(
            f"{model_dir}/{meta_file} was trained with {key} {got!r}, but the zoo row "
            f"{row.name} says --{key}={want}. Ship the controller its row describes, or "
            "fix the row's flags in rl755/zoo/rows.py (controllers ship with zoo models)."
        )
    for key in ("encoder", "sequential_model"):
        want = flags.get(key, "none")
        if want == "none":
            continue
        dependency = zoo.get(row.environment, want, kind=zoo.FLAG_KINDS[key])
        if not shipped.is_shipped(dependency, base):
            raise BadInput(
                f"{row.environment} {row.name} reads the {key} {want}, which is not shipped "
                f"in {base}. Ship it first: {shipped.ship_command(dependency)}"
            )
        shipped_sources[key] = shipped.read_record(dependency, base)["source"]
        reads[key] = {"name": want, "source": shipped_sources[key]}
        got = meta.get(key, "none")
        if got != want:  # trained with --encoder_dir / --sequential_model_dir
            if (
                os.path.abspath(os.path.expanduser(_dir_of(got)))
                != shipped_sources[key]["model_dir"]
            ):
                raise BadInput(
                    f"{model_dir}/{meta_file} was trained with the {key} in {_dir_of(got)}, "
                    f"but the shipped {want} comes from {shipped_sources[key]['model_dir']}. "
                    f"Ship {want} from that dir first: {shipped.ship_command(dependency)} "
                    f"--model_dir={_dir_of(got)}"
                )
            meta[key] = want
            reads[key]["trained_as"] = got
    sharded_io.write_json_atomic(str(out / meta_file), meta)
    with open(out / params_file, "wb") as f:
        np.save(f, params.astype(np.float32))
    newest = checkpoints.newest_complete_checkpoint(model_dir)
    return {
        "dtype": "float32",
        "checkpoint_number": None if newest is None else newest.number,
        "step": meta.get("generation"),
        "score": meta.get("score"),
        "score_source": meta.get("score_source"),
        "reads": reads,
    }


def _dir_of(name: str) -> str | None:
    """The training dir a controller.json names instead of a zoo model ("dir:<dir>" for a
    sequential model, "dir:<model>:<Z>:<dir>" for an encoder, see controller.resolve)."""
    if not name.startswith("dir:"):
        return None
    parts = name.split(":", 3)
    return parts[3] if len(parts) == 4 and parts[2].isdigit() else name[4:]


def _record(row, model_dir: str, details: dict) -> dict:
    runs = [r for r in run_record.read_records(model_dir) if r.get("out_dir") == model_dir]
    last = runs[-1] if runs else None
    keys = ("stage", "git", "start_time", "end_time", "status", "host", "flags")
    return {
        "environment": row.environment,
        "name": row.name,
        "kind": row.kind,
        "model": row.model,
        "flags": row.flags,
        "dtype": details.pop("dtype"),
        "source": {
            "model_dir": model_dir,
            "checkpoint_number": details.pop("checkpoint_number"),
            "step": details.pop("step"),
            "run": None if last is None else {k: last.get(k) for k in keys},
        },
        "flags_differ": [] if last is None else flag_differences(row, last.get("flags") or {}),
        **details,
        "export": {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "git": run_record.git_info(),
            "host": socket.gethostname(),
            "argv": list(sys.argv),
        },
    }


def flag_differences(row, run_flags: dict) -> list[str]:
    """The row's flags that the source run (its newest run record's flags) set otherwise, as
    "--name=<row> (run: <value>)": the row should hold the exact flags of what ships.

    A row's value is read as the shell would (`$RL755_DATA_DIR/...` matches the run's expanded
    path), and a controller row's --encoder / --sequential_model matches a run that named the
    model's dir instead (--encoder_dir / --sequential_model_dir: the export checks that the dir
    is the one the shipped row came from)."""
    out = []
    for key, value in row.flag_values().items():
        if key not in run_flags:
            continue
        ran = run_flags[key]
        value = os.path.expandvars(value)
        if key in ("encoder", "sequential_model") and ran in (None, "none"):
            if run_flags.get(f"{key}_dir"):
                continue
        if isinstance(ran, bool):
            same = ran == (value.lower() not in ("false", "0"))
        elif isinstance(ran, int | float):
            try:
                same = float(value) == float(ran)
            except ValueError:
                same = False
        else:
            same = str(ran) == value
        if not same:
            out.append(f"--{key}={value} (run: {ran})")
    return out


def _replace_dir(tmp: Path, final: Path) -> None:
    """Renames `tmp` to `final`, replacing an older copy (moved aside, then deleted)."""
    old = None
    if final.exists():
        old = Path(sharded_io.tmp_path_for(str(final)))
        os.rename(final, old)
    os.rename(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
