"""Retrieval transformers: the model, its nearest-neighbour index and its memory of past windows."""
