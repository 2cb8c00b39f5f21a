"""Offline test rig: a tiny random-weight causal LM built on the spot, and a scripted model backend."""
