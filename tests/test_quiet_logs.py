"""Logs a person can read: TensorFlow's start-up chatter is filtered in every process that
imports rl755 (Ray workers included), other warnings pass (rl755.common.tf_setup)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from rl755.common import tf_setup

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What `make demo` printed from every worker before (issue 16), and Ray's token notice.
CHATTER = (
    "oneDNN custom operations are on",
    "Could not find cuda drivers",
    "failed call to cuInit",
    "All log messages before absl::InitializeLog()",
    "Token authentication is enabled for this Ray cluster",
)


def _python(code: str, **env):
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300, env=environ, cwd=REPO,
    )  # fmt: skip


def _chatter(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(c in line for c in CHATTER)]


def test_importing_rl755_then_tensorflow_prints_no_chatter_but_keeps_warnings():
    proc = _python("""
        import os, sys
        import rl755
        import tensorflow as tf
        print(tf.constant(2) * 3)
        from rl755.common import tf_setup
        with tf_setup.filtered_stderr():  # C++ writes straight to file descriptor 2
            os.write(2, b"I0000 port.cc:153] oneDNN custom operations are on. ...\\n")
            os.write(2, b"W0000 something.cc:1] a warning that matters\\n")
        """)
    assert proc.returncode == 0, proc.stderr
    assert "tf.Tensor(6" in proc.stdout
    assert _chatter(proc.stderr) == [], proc.stderr
    assert proc.stderr.strip().splitlines() == ["W0000 something.cc:1] a warning that matters"]
    # The opt-out shows everything TensorFlow alone prints (which lines depends on the CPU:
    # the oneDNN notice, the CPU-feature note, the CUDA probe), timestamps and pids aside.
    shown = _python("import rl755, tensorflow", RL755_TF_STARTUP_LOGS="1")
    alone = _python("import tensorflow")
    assert shown.returncode == alone.returncode == 0, shown.stderr + alone.stderr
    assert _log_lines(alone.stderr), alone.stderr
    assert _log_lines(shown.stderr) == _log_lines(alone.stderr), shown.stderr


def _log_lines(stderr: str) -> set[str]:
    """stderr's lines without absl's timestamp and thread id ("I0000 00:00:17.5  354 x.cc:1]
    m" -> "I x.cc:1] m")."""
    return {re.sub(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ", r"\1 ", line) for line in stderr.splitlines()}


def test_noise_is_only_the_listed_lines():
    assert tf_setup.is_noise(
        "I0000 00:00:17.9 354 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used."
    )
    assert not tf_setup.is_noise("W0000 ... Out of memory while trying to allocate")
    assert not tf_setup.is_noise("E0000 ... DataLossError: truncated record at 0")
    if not os.path.exists("/dev/nvidiactl"):
        assert tf_setup.is_noise("E0000 cuda_platform.cc:52] failed call to cuInit: ...")


def test_split_devices_still_work_after_a_quiet_import():
    """The device listing inside the quiet import must not initialize TF's runtime."""
    proc = _python("""
        from rl755.common import tf_setup
        tf_setup.split_cpu_into_logical_devices(2)
        tf_setup.limit_threads(1)
        import tensorflow as tf
        print(len(tf.config.list_logical_devices("CPU")))
        """)
    assert proc.returncode == 0 and proc.stdout.strip() == "2", proc.stderr


def test_mixture_sampling_prints_no_onednn_type_notice():
    """TFP's mixture sampling transposes int32 indices; oneDNN then printed "oneDNN supports
    DT_INT32 only on platforms with AVX-512. Falling back ..." once per process, also on
    CPUs with AVX-512 (every dream worker). The MDN head absorbs it; warnings still pass."""
    sample = """
        import os
        import rl755, tensorflow as tf
        from rl755.models.sequential.heads import MixtureDensityHead
        head = MixtureDensityHead(representation_size=3, num_components=2)
        out = head(tf.zeros([4, 8]))
        print(tf.function(lambda o: head.sample(o, seed=2))(out).shape)  # as dream workers do
        print(head.sample(out, temperature=1.1, seed=1).shape)
        os.write(2, b"W0000 something.cc:1] a warning that matters\\n")
        """
    proc = _python(sample)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["(4, 3)", "(4, 3)"]
    assert tf_setup.ONEDNN_TYPE_NOTICE not in proc.stderr, proc.stderr
    assert "a warning that matters" in proc.stderr
    # Where this CPU prints the notice at all, the opt-out shows it (so the above is no accident).
    raw = _python("import rl755, tensorflow as tf; tf.transpose(tf.zeros([1, 2], tf.int32))")
    if tf_setup.ONEDNN_TYPE_NOTICE in raw.stderr:
        shown = _python(sample, RL755_TF_STARTUP_LOGS="1")
        assert tf_setup.ONEDNN_TYPE_NOTICE in shown.stderr, shown.stderr


@pytest.mark.slow
def test_a_ray_stage_prints_no_start_up_chatter(tmp_path, cold_python):
    """Stage 1 with 2 Ray workers, as `make demo` runs it: the progress and the summary,
    nothing from TensorFlow's or Ray's start-up (in a fresh interpreter: cold_python)."""
    proc = subprocess.run(
        [
            sys.executable, os.path.join(REPO, "scripts/data_gen/collect_rollouts.py"),
            "--environment=FAKE_PIXELS", "--policy=RandomPolicy", "--num_rollouts=2",
            "--parallelism=2", "--use_ray", "--max_steps=8", f"--out_dir={tmp_path / 'r'}",
            "--out_format=tfrecord", "--seed=1",
        ],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Wrote 2 files (2 rollouts" in proc.stderr
    assert _chatter(proc.stderr) == [], proc.stderr
