"""Launching and monitoring stages on SLURM (or locally with the same API).

- `sbatch`: `Resources` and readable, injection-proof sbatch scripts; `submit`.
- `launcher`: `launch(script, flags, ...)` one stage as a job, an array (`ArraySpec`) or a
  local run; `scripts/launch.py` is its command line.
- `instances`: `ArraySpec`, placeholders, flags <-> command lines.
- `chain`: `Stage` + `submit_chain(stages)`: afterok chains on SLURM (checked first, all or
  nothing), in order locally; `resume`: what a rerun need not submit.
- `cluster`: what the cluster offers and whether a request can ever start there;
  `site`: one's own cluster described in the rl755 config file ("slurm").
- `status`: `collect_status(dir)` from run records, SLURM and TensorBoard;
  `scripts/status.py` prints it; `pending`: jobs that will never start; `chain_status`:
  a chain in one line ("stage 3 of 8 running (...), 2 done, 0 failed").
None of these import TensorFlow, so they start fast on login nodes.
"""
