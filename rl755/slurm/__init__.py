"""Launching and monitoring stages on SLURM (or locally with the same API).

- `sbatch`: `Resources` and readable, injection-proof sbatch scripts; `submit`.
- `launcher`: `launch(script, flags, ...)` one stage as a job, an array (`ArraySpec`) or a
  local run; `scripts/launch.py` is its command line.
- `chain`: `Stage` + `submit_chain(stages)`: afterok chains on SLURM, in order locally.
- `status`: `collect_status(dir)` from run records, SLURM and TensorBoard;
  `scripts/status.py` prints it.
None of these import TensorFlow, so they start fast on login nodes.
"""
