"""Every detector run on one observation: its findings, or its CRASH / HANG."""

from __future__ import annotations

from gemmcheck.phases import timed
from gemmcheck.verdict import Finding
from gemmcheck.judge.hazards.observing import Observation
from gemmcheck.judge.hazards.plain_detectors import PLAIN_DETECTORS
from gemmcheck.judge.hazards.simulator_detectors import SIMULATOR_DETECTORS


@timed("detectors")
def detect(obs: Observation) -> list[Finding]:
    """Every detector's findings for one observation (or its CRASH / HANG). The simulator's
    detectors find nothing in an observation without cpu-sim reports."""
    if obs.failure is not None:
        return [obs.failure]
    return [f for detector in PLAIN_DETECTORS + SIMULATOR_DETECTORS for f in detector(obs)]
