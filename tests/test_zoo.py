"""rl755.zoo: trained models as rows; everything about a model (saved_models functions and
docstrings, the "train it first" command, README tables, dataset names) comes from its row."""

import importlib
import inspect
import os
import pickle
import pydoc
import re
import shlex
import subprocess
import sys

import pytest

from rl755 import zoo
from rl755.controller import resolve
from rl755.data import registry
from rl755.environments import Environments, EnvironmentSpec
from rl755.models import catalogue

SEED_ENVS = ["CAR_RACING", "FAKE_PIXELS", "DOOM_TAKE_COVER", "BREAKOUT"]


def _script_flags(repo_root, script: str) -> set[str]:
    with open(os.path.join(repo_root, script)) as f:
        return set(re.findall(r'DEFINE_\w+\(\s*"(\w+)"', f.read()))


def _flags(command: str) -> dict[str, str]:
    tokens = [t for t in shlex.split(command.replace("\\\n", " ")) if t.startswith("--")]
    return dict((t[2:].split("=", 1) + [""])[:2] for t in tokens)


def test_zoo_page_tables_are_what_zoo_table_prints(repo_root):
    out = subprocess.run(
        [sys.executable, "scripts/dev/zoo_table.py"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == zoo.readme_tables()
    with open(os.path.join(repo_root, zoo.readme.PAGE)) as f:
        page = f.read()
    start, end = page.index(zoo.readme.BEGIN), page.index(zoo.readme.END)
    assert (
        page[start : end + len(zoo.readme.END)] == out
    ), f"{zoo.readme.PAGE}'s zoo tables are stale: python scripts/dev/zoo_table.py --write"
    for row in zoo.MODELS:
        assert f"| {row.environment} | `{row.name}` |" in out


@pytest.mark.parametrize("row", zoo.MODELS, ids=lambda r: f"{r.environment}.{r.name}")
def test_every_row_names_things_that_exist(row, repo_root):
    env = Environments.from_name(row.environment)
    assert zoo.get(env, row.name) is row  # names are unique per environment
    flags = row.flag_values()
    assert set(flags) <= _script_flags(repo_root, zoo.entry.SCRIPTS[row.kind]), row.flags
    assert _flags(row.train_command()) == dict(
        flags,
        environment=env.name,
        model_dir=row.display_dir(),
        **({"model": row.model} if row.model else {}),
    )
    if row.kind == zoo.ENCODER:
        assert catalogue.kind_of(row.model) == catalogue.ENCODER
        assert registry.encoded_rollouts_class(env, row.dataset).REPRESENTATION_SIZE == int(
            flags["representation_size"]
        )
    if row.kind == zoo.SEQUENTIAL:
        assert catalogue.kind_of(row.model) == catalogue.SEQUENTIAL
        registry.encoded_rollouts_class(env, row.dataset)
    if row.kind == zoo.CONTROLLER:
        for flag, kind in (("encoder", zoo.ENCODER), ("sequential_model", zoo.SEQUENTIAL)):
            if flags.get(flag, "none") != "none":
                zoo.get(env, flags[flag], kind=kind)
    if row.resumes_from:
        assert zoo.get(env, row.resumes_from).kind == row.kind
    assert pickle.loads(pickle.dumps(row)) == row


def test_doom_rows_hold_the_commands_the_experiment_ran(repo_root):
    """The row is the single truth; the Doom experiment's history shows what was run."""
    with open(os.path.join(repo_root, "experiments/doom_take_cover/small_scale/README.md")) as f:
        readme = f.read()
    small = readme.index("## World Models' DoomTakeCover")
    scaled = readme.index("## Scaled up", small)
    sections = {"small": readme[small:scaled], "scaled": readme[scaled:]}
    for name, section in (
        ("mdn_rnn_64ld", "small"),
        ("raw_rollout_vae_64ld", "scaled"),
        ("mdn_rnn_64ld_episodes", "scaled"),
    ):
        row = zoo.get("DOOM_TAKE_COVER", name)
        blocks = "\n".join(sections[section].split("```")[1::2])  # the code blocks
        commands = re.split(r"\n(?=python )", blocks)
        [ran] = [
            c for c in commands if f"--model_dir=$RL755_MODELS_DIR/doom_take_cover/{name} " in c
        ]
        ran = _flags(re.sub(r"\s+#[^\n]*", "", ran))
        ran["model_dir"] = row.display_dir()
        assert _flags(row.train_command()) == ran, name
    assert zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld").dataset == "RawRolloutVae64ld"


@pytest.mark.parametrize("env_name", SEED_ENVS)
def test_saved_models_modules_are_generated_from_the_rows(env_name):
    env = Environments.from_name(env_name)
    module = importlib.import_module(f"rl755.models.{env.folder_name}.saved_models")
    functions = {n: f for n, f in vars(module).items() if callable(f) and not n.startswith("_")}
    for imported in ("zoo", "annotations", "TYPE_CHECKING"):
        functions.pop(imported, None)
    assert sorted(functions) == sorted(zoo.names(env))
    for name, fn in functions.items():
        row = zoo.get(env, name)
        assert inspect.cleandoc(fn.__doc__) == inspect.cleandoc(row.docstring())
        assert fn.__module__ == module.__name__
        assert pickle.loads(pickle.dumps(fn)) is fn
        help_text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
        assert "python scripts/models/" in help_text and f"{name}/" in help_text


@pytest.mark.parametrize("env_name", SEED_ENVS)
def test_saved_models_modules_are_what_the_rows_generate(repo_root, env_name):
    """Explicit functions (help() and the API reference see them), written from the rows."""
    from rl755.zoo import saved_source

    with open(os.path.join(repo_root, saved_source.module_path(env_name))) as f:
        assert f.read() == saved_source.source(env_name), (
            f"{saved_source.module_path(env_name)} is stale: "
            "python scripts/dev/zoo_table.py --write"
        )


def test_missing_models_fail_with_the_command_of_their_row():
    from rl755.common import config

    for name in ("raw_rollout_vae_4ld", "mdn_rnn_vae_4ld", "linear_controller_vae"):
        row = zoo.get("FAKE_PIXELS", name)
        with pytest.raises(FileNotFoundError) as e:
            getattr(importlib.import_module("rl755.models.fake.saved_models"), name)()
        model_dir = str(config.env_models_dir("fake") / name)
        assert row.train_command(model_dir) in str(e.value)
    row = zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld_end_weighted")
    with pytest.raises(FileNotFoundError, match=r"cp -r \S+/mdn_rnn_64ld \S+end_weighted, set"):
        row()
    assert "copying `mdn_rnn_64ld`'s model dir" in row.docstring()


def test_names_resolve_strictly_and_by_kind(registered_env):
    with pytest.raises(LookupError, match="raw_rollout_vae_4ld, mdn_rnn_vae_4ld"):
        zoo.get("FAKE_PIXELS", "nope")
    with pytest.raises(LookupError, match="sequential model 'raw_rollout_vae_4ld'"):
        zoo.get("FAKE_PIXELS", "raw_rollout_vae_4ld", kind=zoo.SEQUENTIAL)
    spec = resolve.make_agent_spec("FAKE_PIXELS", "LinearController", encoder="raw_rollout_vae_4ld")
    assert spec.encoder_fn is zoo.get("FAKE_PIXELS", "raw_rollout_vae_4ld")
    assert pickle.loads(pickle.dumps(spec)).encoder_fn == spec.encoder_fn
    with pytest.raises(LookupError, match="--sequential_model takes one of those"):
        resolve.make_agent_spec(
            "FAKE_PIXELS", "LinearController", "raw_rollout_vae_4ld", "raw_rollout_vae_4ld"
        )
    # An environment without rows: no files needed, and the lookups say so.
    assert zoo.rows(registered_env) == []
    with pytest.raises(LookupError, match=r"\(none yet\)"):
        zoo.get(registered_env, "anything")
    assert list(registry.encoded_rollouts_classes(registered_env)) == ["VaeEncodedRollouts"]


@pytest.fixture
def registered_env():
    spec = EnvironmentSpec(
        name="ZOO_LESS",
        constructor="rl755.testing.old_api_env:OldApiDots",
        observation_shape=(16, 16, 3),
        num_discrete_actions=3,
    )
    yield Environments.register(spec)
    Environments.unregister("ZOO_LESS")


@pytest.mark.parametrize("env_name", SEED_ENVS)
def test_datasets_are_derived_from_the_environment_and_encoder_rows(env_name, tmp_path):
    env = Environments.from_name(env_name)
    raw = importlib.import_module(f"rl755.data.{env.folder_name}.raw_rollouts")
    assert raw.RawRollouts is registry.raw_rollouts_class(env)
    assert raw.RawRollouts().tfrecords_pattern() == str(
        tmp_path / "data" / env.folder_name / "raw_rollouts" / "rollouts-{split}*.tfrecord-*"
    )
    encoded = importlib.import_module(f"rl755.data.{env.folder_name}.encoded_rollouts")
    classes = registry.encoded_rollouts_classes(env)
    encoders = zoo.rows(env, zoo.ENCODER)
    assert list(classes) == ["VaeEncodedRollouts"] + [r.dataset for r in encoders]
    for row in encoders:
        cls = getattr(encoded, row.dataset)
        assert cls is classes[row.dataset] and row.name in cls.__doc__
        builder = cls()
        assert builder.representation_size() == row.representation_size
        assert builder.directory().endswith(f"/encoded_rollouts/{row.name}")
    with pytest.raises(LookupError, match="Valid --rollouts_dataset values: VaeEncodedRollouts"):
        registry.encoded_rollouts_class(env, "Nope")
    assert zoo.get("CAR_RACING", "raw_rollout_vae_32ld").dataset == "RawRolloutVae32ld"


@pytest.mark.parametrize("env_name", SEED_ENVS)
def test_the_generated_module_defines_one_loading_function_per_row(env_name, monkeypatch):
    """What the saved_models text does when run (mutation runs cannot compare the committed
    files, which mutmut rewrites): each row's function, its docstring and what it loads."""
    from rl755.zoo import saved_source
    from rl755.zoo.rows import MODELS

    namespace = {}
    exec(compile(saved_source.source(env_name), "saved_models.py", "exec"), namespace)
    rows = [r for r in MODELS if r.environment == env_name]
    functions = {k: v for k, v in namespace.items() if inspect.isfunction(v)}
    assert list(functions) == [r.name for r in rows]
    assert namespace["__doc__"].startswith(f"Trained {env_name} models (the original interface)")
    asked = []

    class Row:
        def __init__(self, environment, name):
            self.environment, self.name = environment, name

        def load(self):
            asked.append((self.environment, self.name))
            return self.name

    monkeypatch.setattr(zoo, "get", Row)
    for row, fn in zip(rows, functions.values()):
        assert inspect.cleandoc(fn.__doc__) == inspect.cleandoc(row.docstring())
        returns = {zoo.ENCODER: "ObservationEncoder", zoo.SEQUENTIAL: "SequentialModel"}
        assert fn.__annotations__.get("return") == returns.get(row.kind), row.name
        assert fn() == row.name
    assert asked == [(env_name, r.name) for r in rows]
