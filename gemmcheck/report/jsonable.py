"""How report files turn numpy values, paths and enums into JSON."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gemmcheck.verdict import Defect


def json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (Defect,)):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return repr(value)
