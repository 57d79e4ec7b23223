"""Exact tests on the model's float arrays, cheaper than their numpy spelling.

`np.isclose(a, b)` costs some 40 us of Python per call whatever the size (it checks every
value for finiteness); the structural rules call it a dozen times per evaluation. For a finite
`b` these functions give exactly its answer: |a - b| <= 1e-8 + 1e-5·|b| (numpy's default
tolerances), False for a NaN or an infinite `a`.
"""

from __future__ import annotations

import numpy as np

from .inputs import Array, Value

__all__ = ["close", "is_zero"]

_ATOL = 1e-8
_RTOL = 1e-5


def is_zero(a: Value) -> Array:
    """np.isclose(a, 0.0)."""
    return np.abs(a) <= _ATOL


def close(a: Value, b: Value) -> Array:
    """np.isclose(a, b) for a finite `b`."""
    return np.abs(np.subtract(a, b)) <= _ATOL + _RTOL * np.abs(b)
