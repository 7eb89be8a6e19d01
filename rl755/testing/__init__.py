"""Fakes for tests: a tiny pixel environment (see `fake_env`)."""
