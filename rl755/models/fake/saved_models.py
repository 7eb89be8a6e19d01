"""Trained FAKE_PIXELS models (seed interface): one no-argument function per rl755.zoo row of
FAKE_PIXELS, generated from rl755/zoo/rows.py; help(<function>) shows how each was trained."""

from rl755 import zoo

globals().update(zoo.saved_model_functions("FAKE_PIXELS", __name__))
