"""Observation encoders: the convolutional VAE, its trainer, callbacks and saved-model loader."""
