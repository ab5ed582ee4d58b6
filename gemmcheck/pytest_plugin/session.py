"""The session object every gemmcheck plugin shares, and its key in config.stash.

A module of its own so that plugin.py and the suite plugins (hazards, perf, report)
all import it and none imports another plugin: no import cycle between plugins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gemmcheck import backends
from gemmcheck.problems import profiles
from gemmcheck.contract.catalog import Instance, KernelSpec
from gemmcheck.verdict import VerdictLog

# Fixtures that parametrize over catalog instantiations, and which ones each gets.
INSTANCE_FIXTURES = {
    "reference": "kernels declared correct",
    "broken": "kernels declared to have a defect",
    "any_kernel": "every kernel in the catalog",
}


def instances_of(item: pytest.Item) -> list[Instance]:
    """The catalog instantiations a test is parametrized with."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return [p for p in params.values() if isinstance(p, Instance)]


def runs_kernels(item: pytest.Item) -> bool:
    """Whether a test launches catalog kernels: it takes an instantiation parameter, the
    backend, or a fixture that parametrizes over instantiations."""
    names = set(getattr(item, "fixturenames", ()))
    return "backend" in names or bool(names & set(INSTANCE_FIXTURES)) or bool(instances_of(item))


@dataclass
class GemmConfig:
    """Everything the options decided, kept in config.stash."""

    specs: list[KernelSpec]
    catalogs: list[Path]
    kernels: tuple[str, ...] | None
    tiles: tuple[int, ...] | None
    dtypes: tuple[str, ...] | None
    profile: profiles.Profile
    backend_name: str
    backend: backends.Backend | None = None
    backend_error: str | None = None
    resource_rows: list = field(default_factory=list)  # (Instance, Resources), from suites/compile
    skips: dict = field(default_factory=dict)  # instance id -> Counter of its skipped tests' reasons (runstats)
    verdicts: VerdictLog = field(default_factory=VerdictLog)

    def instances(self, which: str) -> list[Instance]:
        out = []
        for spec in self.specs:
            if self.kernels and spec.name not in self.kernels:
                continue
            if which == "reference" and not spec.is_reference:
                continue
            if which == "broken" and spec.is_reference:
                continue
            for inst in spec.instances():
                if self.tiles and inst.tile not in self.tiles:
                    continue
                if self.dtypes and inst.dtype not in self.dtypes:
                    continue
                out.append(inst)
        return out

    @property
    def simulated(self) -> bool:
        """Whether kernels run on the CPU simulator in this session."""
        return backends.backend_class(self.backend_name).simulated


GEMM_CONFIG = pytest.StashKey[GemmConfig]()


def gemm_config(config: pytest.Config) -> GemmConfig:
    """The session's GemmConfig (set by gemmcheck.pytest_plugin.plugin's pytest_configure)."""
    return config.stash[GEMM_CONFIG]
