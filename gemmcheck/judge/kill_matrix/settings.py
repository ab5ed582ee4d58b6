"""The settings a matrix is built under (problem sizes, backend, tools, timeouts)."""

from __future__ import annotations

from dataclasses import dataclass

from gemmcheck.judge import hazards, isolation, sanitizer


@dataclass
class Settings:
    race_sizes: tuple[int, ...] = (1024,)
    race_repeats: int = 3
    backend_name: str = "auto"
    sanitizer_exe: str | None = None     # None: the sanitizer column is not run
    sanitizer_note: str = sanitizer.MISSING
    tools: tuple[str, ...] = sanitizer.TOOLS
    hang_timeout: float = isolation.STEP_TIMEOUT_S
    isolate_all: bool = False
    log_dir: object = None               # a Path: each tool's raw log is written there
    schedules: tuple[str, ...] = hazards.SIMULATOR_SCHEDULES  # cpu-sim: each launch runs under these
    address_check: bool = True           # cpu-sim: one AddressSanitizer launch per row
