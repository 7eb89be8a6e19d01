"""The original path of stage 1b: runs scripts/data_gen/convert_pickles_to_tfrecords.py with the
same flags.

    python scripts/data_gen/car_racing/rollout_pickles_to_tfrecords.py --parallelism=4 \
        --pickles_per_tfrecord_file=16 --pickle_dir=$HOME/rl755_data/car_racing/rollout_pickles \
        --out_dir=$HOME/rl755_data/car_racing/raw_rollouts --out_name=rollouts

Kept for the original README and existing job scripts; it works for every environment.
"""

import os
import runpy

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    runpy.run_path(os.path.join(here, "..", "convert_pickles_to_tfrecords.py"), run_name="__main__")
