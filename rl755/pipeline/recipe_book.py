"""The headline results as recipes (`rl755.pipeline.recipes`), at full size and tiny.

    doom_dream        DoomTakeCover from the dream: three collection sets, the VAE, encoding,
                      the MDN-RNN in phases on the growing data, CMA-ES and the choice in the
                      dream at tau 1.15, then 100 real episodes (zoo: dream_controller)
    car_racing_real   CarRacing in the real environment: the demo's world model and
                      controller, then CMA-ES in the real game at population 4 x 4, then 8 x 4
                      from there (zoo: real_controller_p4, real_controller)
    tiny_doom_dream, tiny_car_racing_real: the same steps, flags and policies at tiny sizes
                      (the real DoomTakeCover for a few steps; the fake environment for
                      CarRacing), for the tests

The full recipes' flags are the zoo rows' (`rl755/zoo/rows.py`); where a row was trained in
several runs (a VAE stopped at step 3,000 of 6,000; an MDN-RNN at step 1,000 of 3,000) the
step trains exactly as far as the shipped model went.
"""

from __future__ import annotations

from collections.abc import Mapping

from rl755.pipeline.recipe_car_racing import CAR_FULL, CAR_TINY, car_racing_recipe
from rl755.pipeline.recipe_doom import DOOM_FULL, DOOM_TINY, doom_recipe
from rl755.pipeline.recipes import FULL_RESOURCES, TINY_RESOURCES, Recipe

# name: (builder, sizes, description, wall times, resources); built when looked up.
_SPECS = {
    "doom_dream": (
        doom_recipe,
        DOOM_FULL,
        "DoomTakeCover from the dream, the whole recipe of the zoo's dream_controller "
        "(estimated 4.5-6.5 h on 2 cores).",
        {
            "2 cores": "4.5-6.5 h (estimate): collection 41 min, VAE 37 min, encoding 40 min, "
            "MDN-RNN 1.5-2.5 h, CMA-ES 11 + 31 min, evaluation 10-20 min",
            "slurm": "2-4 h (estimate): the sets' encodings and the MDN-RNN on GPUs, the held-"
            "action set collected beside the first steps; CMA-ES in the dream and collection "
            "keep the 2-core settings the result was made with",
        },
        FULL_RESOURCES,
    ),
    "car_racing_real": (
        car_racing_recipe,
        CAR_FULL,
        "CarRacing, the real-environment controller's whole recipe (zoo: real_controller_p4, "
        "real_controller; estimated 4.5-5.5 h on 2 cores).",
        {
            "2 cores": "4.5-5.5 h (estimate): the demo's stages 13-25 min, CMA-ES 4 x 4 x 100 "
            "generations 2.9 h, 8 x 4 x 26 generations 66 min, two 100-episode evaluations "
            "10-35 min",
            "slurm": "4-5 h (estimate): CMA-ES in the real game keeps --parallelism=2 (other "
            "batches give other floats), so only the demo's stages get faster",
        },
        FULL_RESOURCES,
    ),
    "tiny_doom_dream": (
        doom_recipe,
        DOOM_TINY,
        "doom_dream's steps at tiny sizes on the real DoomTakeCover (tests; minutes).",
        {"2 cores": "3-10 min", "slurm": "10-30 min (queueing)"},
        TINY_RESOURCES,
    ),
    "tiny_car_racing_real": (
        car_racing_recipe,
        CAR_TINY,
        "car_racing_real's steps at tiny sizes on the fake environment (tests; minutes).",
        {"2 cores": "2-6 min", "slurm": "10-30 min (queueing)"},
        TINY_RESOURCES,
    ),
}


class _Recipes(Mapping):
    """{name: Recipe}, each built from its spec when looked up (a new Recipe each time), so
    that importing this module runs none of the recipe builders."""

    def __contains__(self, name) -> bool:  # without building the recipe
        return name in _SPECS

    def __getitem__(self, name: str) -> Recipe:
        builder, *args = _SPECS[name]
        return builder(*args)

    def __iter__(self):
        return iter(_SPECS)

    def __len__(self) -> int:
        return len(_SPECS)


RECIPES: Mapping[str, Recipe] = _Recipes()


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; valid: {', '.join(sorted(RECIPES))}.")
    return RECIPES[name]
