"""Ops that live in ``nn.functional`` only (padding, ...); activations are in ``pointwise``."""

from __future__ import annotations
