"""Every detector run on one observation: its findings, or its CRASH / HANG."""

from __future__ import annotations

from gemmcheck.phases import timed
from gemmcheck.verdict import Finding
from gemmcheck.judge.hazards.observing import Observation
from gemmcheck.judge.hazards.plain_detectors import PLAIN_DETECTORS, check_values
from gemmcheck.judge.hazards.problems import SCALED
from gemmcheck.judge.hazards.simulator_detectors import SIMULATOR_DETECTORS


@timed("detectors")
def detect(obs: Observation) -> list[Finding]:
    """Every detector's findings for one observation (or its CRASH / HANG). The simulator's
    detectors find nothing in an observation without cpu-sim reports."""
    if obs.failure is not None:
        return [obs.failure]
    if obs.purpose == SCALED:   # there only for the values at alpha 2, beta -1: C is read, so no poison
        return check_values(obs)
    return [f for detector in PLAIN_DETECTORS + SIMULATOR_DETECTORS for f in detector(obs)]
