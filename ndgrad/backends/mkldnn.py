"""``torch.backends.mkldnn``: oneDNN; ndgrad's CPU kernels are NumPy's, never oneDNN's."""

from __future__ import annotations

enabled = True


def is_available() -> bool:
    return False
