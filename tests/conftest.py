"""Shared test set-up: hypothesis without deadlines (the first call of a numba
kernel may compile or load its cache)."""

from hypothesis import settings

settings.register_profile("aiko", deadline=None, max_examples=200)
settings.load_profile("aiko")
