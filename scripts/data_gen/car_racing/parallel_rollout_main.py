"""The original path of stage 1: runs scripts/data_gen/collect_rollouts.py with the same flags.

    python scripts/data_gen/car_racing/parallel_rollout_main.py --environment=CAR_RACING \
        --policy=HastingsRandomPolicy --num_rollouts=10000 --parallelism=16 --max_steps=1000 \
        --out_dir=$HOME/rl755_data/car_racing/rollout_pickles

Kept for the original README and existing job scripts; it works for every environment.
"""

import os
import runpy

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    runpy.run_path(os.path.join(here, "..", "collect_rollouts.py"), run_name="__main__")
