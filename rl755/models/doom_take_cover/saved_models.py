"""Trained DOOM_TAKE_COVER models (seed interface): one no-argument function per rl755.zoo row of
DOOM_TAKE_COVER, generated from rl755/zoo/rows.py; help(<function>) shows how each was trained."""

from rl755 import zoo

globals().update(zoo.saved_model_functions("DOOM_TAKE_COVER", __name__))
