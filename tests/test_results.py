"""The results pages' rows are what the committed evaluations say.

Each 100-episode score on a results page (docs/results/<environment>.md) that has its
per-episode returns in the repository (`evaluation_100*/*.json`, written by
`scripts/models/evaluate_controller.py`) is recomputed from those returns, as the page states
it (mean ± std with ddof 0, the median, seeds 1000-1099 each once), and must appear on the
table row that names it. A re-evaluation that changes a file without the page, or a page edit
without a new evaluation, fails here. The summary tables (docs/results/index.md, README.md)
must state the same numbers as the pages.
"""

import glob
import json
import os
import re

import numpy as np
import pytest

#: (text on the row, folder of the evaluation files, "returns" or the random policy's,
#: median to state beside it or None[, first seed: 1000 unless given])
FRESH = "experiments/car_racing/real_controller_p8/evaluation_seeds2000"
RESULTS = [
    ("`real_controller`:", "experiments/car_racing/real_controller_p8/evaluation_100", None, True),
    ("`real_controller_p4`:", "experiments/car_racing/real_controller/evaluation_100", None, True),
    (
        "`real_controller_p4`'s run after 40 generations",
        "experiments/car_racing/real_controller/evaluation_100_generation40",
        None,
        True,
    ),
    ("the two on fresh seeds", f"{FRESH}/real_controller", None, True, 2000),
    ("the two on fresh seeds", f"{FRESH}/real_controller_p4", None, True, 2000),
    (
        "uniform random actions, same seeds",
        "experiments/car_racing/real_controller/evaluation_100",
        "random_policy",
        False,
    ),
    (
        "shipped as `dream_controller`",
        "experiments/doom_take_cover/dream_controller/evaluation_100",
        None,
        True,
    ),
    (
        "random policy, same seeds",
        "experiments/doom_take_cover/dream_controller/evaluation_100",
        "random_policy",
        False,
    ),
    (
        "`dream_controller` on fresh seeds 4000-4099",
        "experiments/doom_take_cover/dream_controller/evaluation_seeds4000",
        None,
        True,
        4000,
    ),
    (
        "`dream_controller` on fresh seeds 4000-4099",
        "experiments/doom_take_cover/dream_controller/evaluation_seeds4000",
        "random_policy",
        False,
        4000,
    ),
    (
        "ensemble_from_round6",
        "experiments/car_racing/dream_iterations/ensemble_from_round6/evaluation_100",
        None,
        True,
    ),
    (
        "round6/",
        "experiments/car_racing/dream_iterations/round6/evaluation_100",
        None,
        True,
    ),
]


def returns_and_seeds(folder: str, which: str | None) -> tuple[np.ndarray, list[int]]:
    """All episodes of the folder's evaluation files: returns [N] and seeds, in seed order."""
    files = sorted(glob.glob(os.path.join(folder, "*.json")))
    assert files, f"no evaluation files in {folder}"
    pairs = []
    for path in files:
        with open(path) as f:
            result = json.load(f)
        seeds = result["seeds"]  # the random policy plays the controller's seeds
        if which is not None:
            assert which in result, f"{path} has no '{which}' (evaluate with --compare_random)"
            result = result[which]
        assert len(result["returns"]) == len(seeds), path
        pairs += zip(seeds, result["returns"])
    pairs.sort()
    return np.array([r for _, r in pairs]), [s for s, _ in pairs]


#: The results page of each environment folder of experiments/.
PAGES = {
    "car_racing": "docs/results/car-racing.md",
    "doom_take_cover": "docs/results/doom-take-cover.md",
}


def page_lines(repo_root: str, folder: str, label: str) -> list[str]:
    """The table rows naming `label` on the results page of `folder`'s environment."""
    page = PAGES[folder.split("/")[1]]
    with open(os.path.join(repo_root, page)) as f:
        return [line for line in f if line.startswith("|") and label in line]


@pytest.mark.parametrize(
    "label,folder,which,with_median,first_seed",
    [(*r, 1000) if len(r) == 4 else r for r in RESULTS],
    ids=[f"{r[1].split('/')[-2]}/{r[1].split('/')[-1]}-{r[2] or 'controller'}" for r in RESULTS],
)
def test_results_page_states_what_the_committed_evaluation_scores(
    repo_root, label, folder, which, with_median, first_seed
):
    returns, seeds = returns_and_seeds(os.path.join(repo_root, folder), which)
    last = first_seed + 99
    assert seeds == list(range(first_seed, last + 1)), f"{folder}: not seeds {first_seed}-{last}"
    stated = [f"{returns.mean():.1f} ± {returns.std():.1f}"]
    if with_median:
        stated.append(f"(median {np.median(returns):.0f}")
    lines = page_lines(repo_root, folder, label)
    assert lines, f"{PAGES[folder.split('/')[1]]} has no results row naming {label}"
    assert any(all(s in line for s in stated) for line in lines), (
        f"The row for {label} does not state {' '.join(stated)!r}, which {folder} "
        f"({which or 'controller'}) scores; its rows: {lines}"
    )


#: The summary rows (README.md and docs/results/index.md): the row's link, and the folders
#: whose controller and random policy it states.
SUMMARY = [
    ("doom-take-cover.md)", "experiments/doom_take_cover/dream_controller/evaluation_100"),
    (
        "car-racing.md), trained in the real game",
        "experiments/car_racing/real_controller_p8/evaluation_100",
    ),
    (
        "car-racing.md#final-table), trained only in the dream",
        "experiments/car_racing/dream_iterations/ensemble_from_round6/evaluation_100",
    ),
]


@pytest.mark.parametrize("summary", ["README.md", "docs/results/index.md"])
@pytest.mark.parametrize("link,folder", SUMMARY, ids=[s[1].split("/")[-2] for s in SUMMARY])
def test_summary_tables_state_the_pages_numbers(repo_root, summary, link, folder):
    returns, _ = returns_and_seeds(os.path.join(repo_root, folder), None)
    with open(os.path.join(repo_root, summary)) as f:
        [row] = [line for line in f if line.startswith("|") and link in line]
    assert f"{returns.mean():.1f} ± {returns.std():.1f}" in row, (summary, row)
    random_folder = "experiments/car_racing/real_controller/evaluation_100"
    if "doom" in folder:
        random_folder = folder
    random, _ = returns_and_seeds(os.path.join(repo_root, random_folder), "random_policy")
    assert f"{random.mean():.1f} ± {random.std():.1f}" in row, (summary, row)


def test_the_committed_evaluations_play_the_shipped_controllers(repo_root):
    """The files behind the shipped rows evaluated the shipped copies (not a local retrain)."""
    shipped = {  # the zoo name -> the run folder of its committed 100-episode evaluation
        "real_controller": "car_racing/real_controller_p8",
        "real_controller_p4": "car_racing/real_controller",
        "dream_controller": "doom_take_cover/dream_controller",
    }
    for name, run in shipped.items():
        env = run.split("/")[0]
        folder = os.path.join(repo_root, "experiments", run, "evaluation_100")
        assert glob.glob(os.path.join(folder, "*.json")), f"{name}: no evaluation in {folder}"
        for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
            with open(path) as f:
                result = json.load(f)
            assert result["controller_source"] == "shipped", path
            # the shipped copy of this name (rl755/zoo/shipped/<env>/<name>), by its generation
            with open(
                os.path.join(repo_root, "rl755/zoo/shipped", env, name, "controller.json")
            ) as f:
                generation = json.load(f)["generation"]
            assert result["controller_generation"] == generation, (path, name)


#: Evaluations quoted in the prose of a results page's "What was tried" and in their run's
#: lab notes (the README.md beside them), with their median.
TRIED = [
    "experiments/doom_take_cover/dream_calibration/evaluation_100_scale2",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_long400",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_long800",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_long_iter3",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_long_iter4",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_ctrl456",
    "experiments/doom_take_cover/dream_calibration/evaluation_100_ctrl4567",
    "experiments/doom_take_cover/longer_mdn_rnn/evaluation_100_step2000",
    "experiments/doom_take_cover/longer_mdn_rnn/evaluation_100_step2000_t15",
    "experiments/doom_take_cover/longer_mdn_rnn/evaluation_100_whole800_s15",
    "experiments/doom_take_cover/longer_mdn_rnn/evaluation_100_whole4_400_s15",
    "experiments/doom_take_cover/vae_detail/evaluation_100_sampled_z",
    "experiments/doom_take_cover/vae_detail/evaluation_100_real_search_best",
    "experiments/doom_take_cover/vae_detail/evaluation_100_real_search_mean",
    "experiments/doom_take_cover/vae_detail/evaluation_100_vae_more",
    "experiments/doom_take_cover/vae_detail/evaluation_100_vae_more_threshold",
    "experiments/doom_take_cover/vae_detail/evaluation_100_vae_more_120",
    "experiments/doom_take_cover/vae_detail/evaluation_100_vae_more_paper_cma",
    "experiments/doom_take_cover/vae_detail/evaluation_100_vae_more_paper_cma_120",
    "experiments/doom_take_cover/vae_detail/evaluation_seeds4000_vae_more_paper_cma",
]


@pytest.mark.parametrize("folder", TRIED, ids=[f.split("/")[-1] for f in TRIED])
def test_what_was_tried_states_what_the_committed_evaluations_score(repo_root, folder):
    returns, seeds = returns_and_seeds(os.path.join(repo_root, folder), None)
    named = re.search(r"evaluation_seeds(\d+)", folder)  # other seeds are in the folder's name
    first = int(named[1]) if named else 1000
    assert seeds == list(range(first, first + 100)), folder
    score = f"{returns.mean():.1f} ± {returns.std():.1f}"
    notes = os.path.join(repo_root, os.path.dirname(folder), "README.md")
    with open(os.path.join(repo_root, PAGES[folder.split("/")[1]])) as f:
        page = " ".join(f.read().split())
    with open(notes) as f:
        lab = " ".join(f.read().split())
    assert score in page, f"{PAGES[folder.split('/')[1]]} does not state {score} ({folder})"
    assert f"**{score}**" in lab, f"{notes} does not state {score} ({folder})"
    after = lab[lab.index(f"**{score}**") :][:60]  # e.g. "... in the real game (median 728,"
    assert f"(median {np.median(returns):.0f}," in after, f"{notes}: {after}"
