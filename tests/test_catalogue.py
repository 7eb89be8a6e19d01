"""rl755.models.catalogue: every model name for every environment, sized by its presets, with
the seed's per-environment sizes kept exactly."""

import os
import pickle
import re
import sys
import textwrap

import pytest

from rl755.environments import Environments
from rl755.models import catalogue, registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRANSFORMERS = {"tiny": (2, 64, 4, 32), "small": (4, 128, 4, 64), "base": (6, 256, 8, 128)}
TOY = (2, 16, 2, 8)
# environment: (Z, A, LSTM units, mixture components, done_pos_weight of mdn_rnn_with_heads)
SEED_SIZES = {
    "CAR_RACING": (32, 3, 256, 5, 10.0),
    "FAKE_PIXELS": (4, 3, 16, 3, 10.0),
    "DOOM_TAKE_COVER": (64, 3, 512, 5, 1.0),
    "BREAKOUT": (32, 4, 256, 5, 10.0),
}
# Parameter counts of the seed's per-environment modules (CarRacing's VAE and MDN-RNN are
# checked in test_encoder / test_sequential_models).
SEED_PARAMS = {
    ("FAKE_PIXELS", "vae.Vae"): 14_683,
    ("FAKE_PIXELS", "mdn_rnn.mdn_rnn"): 2_148,
    ("FAKE_PIXELS", "mdn_rnn.mdn_rnn_with_heads"): 2_182,
    ("FAKE_PIXELS", "lstm.deterministic_lstm"): 1_604,
    ("FAKE_PIXELS", "lstm.deterministic_lstm_with_heads"): 1_638,
    ("FAKE_PIXELS", "transformer.base_deterministic_transformer"): 6_788,
    ("FAKE_PIXELS", "transformer.base_deterministic_transformer_with_heads"): 6_822,
    ("DOOM_TAKE_COVER", "vae.Vae"): 4_446_915,
    ("DOOM_TAKE_COVER", "mdn_rnn.mdn_rnn"): 1_680_320,
    ("DOOM_TAKE_COVER", "mdn_rnn.mdn_rnn_with_heads_end_weighted"): 1_681_346,
    ("BREAKOUT", "mdn_rnn.mdn_rnn_with_heads"): 423_906,
}


@pytest.mark.parametrize("env_name", list(SEED_SIZES))
def test_presets_keep_the_seed_sizes(env_name):
    z, a, units, components, done_weight = SEED_SIZES[env_name]
    env = Environments.from_name(env_name)

    def build(name, **kwargs):
        model = catalogue.build(env, name, **kwargs)
        assert (model.representation_size, model.action_size) == (z, a), name
        return model

    mdn = build("mdn_rnn.mdn_rnn")
    assert mdn.backbone.units == units and mdn.z_head.num_components == components
    assert not mdn.has_reward_head and mdn.done_pos_weight == 10.0
    heads = build("mdn_rnn.mdn_rnn_with_heads")
    assert heads.has_reward_head and heads.has_done_head and heads.done_pos_weight == done_weight
    assert build("mdn_rnn.mdn_rnn_with_heads_end_weighted").done_pos_weight == 50.0
    assert build("mdn_rnn.mdn_rnn_with_heads", done_pos_weight=3.0).done_pos_weight == 3.0
    for name in ("lstm.deterministic_lstm", "lstm.deterministic_lstm_with_heads"):
        lstm = build(name)
        assert lstm.backbone.units == units and lstm.done_pos_weight == 10.0
        assert lstm.has_done_head == name.endswith("_with_heads")
    for preset, size in TRANSFORMERS.items():
        for suffix in ("", "_with_heads"):
            t = build(f"transformer.{preset}_deterministic_transformer{suffix}")
            b = t.backbone
            want = TOY if env_name == "FAKE_PIXELS" else size
            assert (b.num_layers, b.model_dim, b.num_heads, b.window) == want
            assert t.has_reward_head == bool(suffix) and t.done_pos_weight == 10.0
    vae = catalogue.build(env, "vae.Vae")
    assert vae.representation_size == z and vae.frame_shape == env.observation_shape
    crop = (0, 84) if env_name == "CAR_RACING" else None
    assert (vae.crop_rows, vae.image_size) == (crop, 16 if env_name == "FAKE_PIXELS" else 64)
    assert catalogue.build(env, "vae.Vae", representation_size=5).representation_size == 5


@pytest.mark.parametrize("key", list(SEED_PARAMS), ids=" ".join)
def test_parameter_counts_match_the_seed(key):
    model = catalogue.build(*key)
    model.build_for_frames() if key[1] == "vae.Vae" else model.ensure_built()
    assert model.count_params() == SEED_PARAMS[key]


def test_unknown_names_fail_listing_the_valid_ones():
    with pytest.raises(LookupError, match=r"vae\.Vae, mdn_rnn\.mdn_rnn, .*base_deterministic"):
        catalogue.build("CAR_RACING", "mdn_rnn.nope")
    with pytest.raises(LookupError, match=r"is a sequential model\). Valid --model values: vae"):
        catalogue.model_fn("CAR_RACING", "lstm.deterministic_lstm", kind=catalogue.ENCODER)
    with pytest.raises(ValueError, match="Valid --environment"):
        catalogue.model_fn("NO_SUCH_ENV", "vae.Vae")
    assert catalogue.names(catalogue.ENCODER) == ["vae.Vae"]


def test_model_fn_is_a_picklable_constructor_with_overrides():
    fn = catalogue.model_fn("FAKE_PIXELS", "mdn_rnn.mdn_rnn_with_heads", units=8)
    fn = pickle.loads(pickle.dumps(fn))
    assert fn.environment is Environments.FAKE_PIXELS
    assert fn().backbone.units == 8
    assert fn(units=4, num_components=2).z_head.num_components == 2


# ---- registrations ---------------------------------------------------------------------------
ROW = dict(name="mdn_rnn.mdn_rnn_typo", builder="rl755.models.sequential.models:mdn_rnn")


def _register(source: str, tmp_path, name="bad_registration", keep=False):
    """Imports a file holding `source` (a registration), as a researcher's file would be."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (pickles refer to its functions by module name)
    try:
        spec.loader.exec_module(module)
    finally:
        if not keep:
            sys.modules.pop(name, None)
    return str(path)


HEADER = "from rl755.models.registry import Preset, Sequential, register\n"


@pytest.mark.parametrize(
    "row, message",
    [
        # a misspelled family: the builder does not exist (no fallback to the MDN-RNN)
        (
            'Sequential("mdn_rnn.x", "rl755.models.sequential.models:mdn_rn", {"units": 8})',
            r"defines no 'mdn_rn'; it has: .*deterministic_lstm, .*mdn_rnn",
        ),
        ('Sequential("gru.x", "rl755.models.sequentail.models:gru")', "there is no module"),
        # a missing preset: the builder needs an argument nobody gives
        (
            'Sequential("gru.x", "examples.gru_world_model:GruBackbone")',
            r"needs units, which no preset gives",
        ),
        (
            'Sequential("lstm.x", "rl755.models.sequential.models:mdn_rnn", '
            '{"units": Preset("rnn_unit")})',
            "ModelPresets has no field 'rnn_unit'",
        ),
        (
            'Sequential("lstm.x", lambda representation_size, action_size, units=8: None, '
            '{"unit": 8})',
            "takes no argument unit",
        ),
        ('Sequential("no_family", "rl755.models.sequential.models:mdn_rnn")', "<family>.<name>"),
        # a duplicate name with another builder
        (
            'Sequential("mdn_rnn.mdn_rnn", "rl755.models.sequential.models:deterministic_lstm")',
            r"already registered by .*catalogue.py",
        ),
    ],
)
def test_a_bad_registration_fails_at_import_naming_its_file(row, message, tmp_path):
    before = catalogue.names()
    with pytest.raises(registry.RegistrationError) as error:
        _register(HEADER + f"register({row})\n", tmp_path)
    assert str(error.value).startswith(str(tmp_path / "bad_registration.py") + ": ")
    assert re.search(message, str(error.value)), str(error.value)
    assert catalogue.names() == before


def test_a_registered_model_is_a_model_name_everywhere(tmp_path):
    path = _register(
        HEADER + textwrap.dedent("""
        def tiny_mdn(representation_size, action_size, units, **kw):
            from rl755.models.sequential.models import mdn_rnn
            return mdn_rnn(representation_size, action_size, units=units, num_components=2, **kw)

        register(Sequential("mdn_rnn.tiny", tiny_mdn, {"units": Preset("rnn_units")}, heads=True))
        """),
        tmp_path,
        name="tiny_mdn",
        keep=True,
    )
    try:
        assert registry.get("mdn_rnn.tiny").where == path
        assert catalogue.kind_of("mdn_rnn.tiny") == catalogue.SEQUENTIAL
        assert "mdn_rnn.tiny" in catalogue.help_text(catalogue.SEQUENTIAL)
        fn = pickle.loads(pickle.dumps(catalogue.model_fn("DOOM_TAKE_COVER", "mdn_rnn.tiny")))
        model = fn()
        assert model.backbone.units == 512 and model.z_head.num_components == 2  # Doom's preset
        assert model.has_reward_head and model.has_done_head
        assert catalogue.build("FAKE_PIXELS", "mdn_rnn.tiny", units=3).backbone.units == 3
        # the same row again (a module imported twice) is no duplicate
        registry.register(registry.get("mdn_rnn.tiny"))
    finally:
        registry.unregister("mdn_rnn.tiny")
        sys.modules.pop("tiny_mdn")
    with pytest.raises(
        LookupError, match="Unknown model .mdn_rnn.tiny.*name the module in RL755_MODEL_MODULES"
    ):
        catalogue.kind_of("mdn_rnn.tiny")


def test_model_modules_variable_registers_in_new_processes(tmp_path):
    import subprocess

    env = {**os.environ, catalogue.MODULES_VARIABLE: "examples.gru_world_model", "PYTHONPATH": REPO}
    code = "from rl755.models import catalogue; print(catalogue.kind_of('gru.gru_with_heads'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "sequential", out.stderr[-2000:]
    env[catalogue.MODULES_VARIABLE] = "examples.no_such_file"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "RL755_MODEL_MODULES='examples.no_such_file': there is no module" in out.stderr


def test_retrieval_names_carry_their_sizes_retrieval_settings():
    from rl755.models.retrieval.model import RETRIEVAL_PRESETS

    for size, settings in RETRIEVAL_PRESETS.items():
        model = catalogue.build("FAKE_PIXELS", f"transformer.{size}_retrieval_transformer")
        assert model.backbone.settings == settings and model.name == f"{size}_retrieval_transformer"
