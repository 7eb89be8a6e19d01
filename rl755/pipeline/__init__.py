"""The five World Models stages as one chain, locally or on SLURM (`scripts/pipeline.py`).

    from rl755 import pipeline
    preset = pipeline.PRESETS["demo"]
    summary = pipeline.run_local(preset, out_dir="runs/demo")     # blocking, prints a table
    results = pipeline.submit_slurm(preset, out_dir="/scratch/me/wm")   # afterok chain
    catch = pipeline.get_preset("tiny", environment="CATCH")   # any environment of the table

    presets.py   the sizes of a run, as each stage script's own flags (PRESETS, get_preset),
                 what each stage asks SLURM for, and a preset on another environment
                 (for_environment: models sized by its entry, stages connected by directories)
    resources.py a stage's SLURM resources: preset, then config file, then flags
    stages.py    where each stage reads and writes (Paths), the chain (build_stages), the
                 names checked before anything runs (check_preset)
    runners.py   run_local, submit_slurm, report_from_records (a SLURM run's last job)
    report.py    the closing table and the pictures

Rerunning with the same out_dir resumes: every stage skips or continues finished work.
"""

from rl755.pipeline.presets import PRESETS, STAGE_SCRIPTS, Preset, for_environment, get_preset
from rl755.pipeline.report import collect_pictures, format_summary
from rl755.pipeline.resources import Overrides, parse_overrides, stage_resources
from rl755.pipeline.runners import report_from_records, run_local, submit_slurm
from rl755.pipeline.stages import REPO_ROOT, Paths, build_stages, check_preset, stage_environ
from rl755.pipeline.world_model import WorldModel, find_world_model

__all__ = [
    "Overrides",
    "PRESETS",
    "STAGE_SCRIPTS",
    "Paths",
    "Preset",
    "WorldModel",
    "REPO_ROOT",
    "build_stages",
    "check_preset",
    "collect_pictures",
    "find_world_model",
    "for_environment",
    "format_summary",
    "get_preset",
    "parse_overrides",
    "report_from_records",
    "run_local",
    "stage_environ",
    "stage_resources",
    "submit_slurm",
]
