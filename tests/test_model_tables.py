"""Small texts of rl755.models users read: the infilling benchmark's table and a preset's name."""

from rl755.models import registry
from rl755.models.infilling import eval as infilling_eval


def test_infilling_table_gives_each_model_its_weight_and_values_with_standard_errors():
    results = {
        "plain": {"mse": 0.012345, "mse_se": 0.00123, "ssim": 0.5},
        "gan": {"mse": 0.02, "adversarial_weight": 0.1},
    }
    lines = infilling_eval._table(results).splitlines()
    assert lines[0].startswith("| model | adversarial weight | MSE | best-of-D MSE | SSIM |")
    assert lines[1] == "|" + "---|" * (len(infilling_eval.TABLE_COLUMNS) + 2)
    assert lines[2] == "| plain | - | 0.01235 ± 0.0012 | - | 0.5 | - | - | - |"
    assert lines[3] == "| gan | 0.1 | 0.02 | - | - | - | - | - |"


def test_a_preset_default_is_named_by_its_path():
    assert str(registry.Preset("sequential", "mdn_rnn", "hidden")) == (
        "presets.sequential.mdn_rnn.hidden"
    )
    assert str(registry.Preset("representation_size")) == "presets.representation_size"
