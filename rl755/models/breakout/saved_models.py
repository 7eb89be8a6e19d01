"""Trained BREAKOUT models (seed interface): one no-argument function per rl755.zoo row of
BREAKOUT, generated from rl755/zoo/rows.py; help(<function>) shows how each was trained."""

from rl755 import zoo

globals().update(zoo.saved_model_functions("BREAKOUT", __name__))
