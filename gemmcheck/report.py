"""What a reviewer sees: allure attachments, labels, defect categories, the
environment, the verdict summary (reports/verdicts.json) and the HTML build.

Checks call the ``attach_*`` functions; each one is a no-op when allure is not
recording (allure-pytest missing, or no results directory), so a check never
needs to know whether a report is being made.

Message convention (every check follows it; categories.json matches on it)
-------------------------------------------------------------------------
A failing check's message starts with the defect class(es) it saw, as
``gemmcheck.verdict.Defect`` values, then a colon::

    wrong_values: matmul_tiled-float32-TILE32 (matmul_tiled<float, 32>), M33xN17xK65 ...
    unwritten_output, wrong_values: matmul_broken_floor_grid-float16-TILE16 ...

``defect_message(defects, text)`` builds that prefix. An environment problem
(no device, a missing tool) says so in words the "Environment problems"
category knows: ``no CUDA device``, ``needs <tool>``, ``not found on PATH``.
Tests whose checks record Verdicts (``VerdictLog.record``) also get a
``defect`` label per defect found, so even a broken variant that was caught
as expected (a passing test) lands in its defect's category.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from gemmcheck import defects
from gemmcheck.verdict import Defect

# -- is allure recording? ---------------------------------------------------------------------

try:  # allure-pytest is optional: without it every attach_* is a no-op
    import allure
    import allure_commons
    from allure_commons.types import AttachmentType, ParameterMode
except ImportError:  # pragma: no cover - exercised on machines without allure-pytest
    allure = allure_commons = AttachmentType = ParameterMode = None


# One entry per pytest session in this process (gemmcheck.report_plugin pushes and pops it):
# a session run inside a recording one (pytester) pushes False, so its checks attach nothing
# to the outer session's current test.
_recording: list[bool] = []


def active() -> bool:
    """True when an allure listener is recording the current test (and, inside a hypothesis
    test, this is the final replay of the failing example: not one of the shrinking steps)."""
    if allure_commons is None or (_recording and not _recording[-1]):
        return False
    if not allure_commons.plugin_manager.hook.attach_data.get_hookimpls():
        return False
    return _final_example()


def _final_example() -> bool:
    try:
        from hypothesis import currently_in_test_context
        from hypothesis.control import current_build_context
    except ImportError:
        return True
    return not currently_in_test_context() or bool(getattr(current_build_context(), "is_final", True))


# -- attachments ----------------------------------------------------------------------------

def attach_text(name: str, text: str) -> None:
    """Attach a text (log, table, source excerpt) to the current test's report."""
    if active():
        allure.attach(text, name=name, attachment_type=AttachmentType.TEXT)


def attach_png(name: str, png: bytes) -> None:
    """Attach a PNG image to the current test's report."""
    if active():
        allure.attach(png, name=name, attachment_type=AttachmentType.PNG)


def attach_csv(name: str, text: str) -> None:
    """Attach a CSV table (allure renders it as a table)."""
    if active():
        allure.attach(text, name=name, attachment_type=AttachmentType.CSV)


def attach_json(name: str, data) -> None:
    if active():
        allure.attach(json.dumps(data, indent=2, default=_json_default), name=name,
                      attachment_type=AttachmentType.JSON)


def attach_sanitizer_log(tool: str, log: str) -> None:
    """Attach a compute-sanitizer log (``tool``: racecheck, synccheck, memcheck, initcheck)."""
    attach_text(f"compute-sanitizer {tool} log", log)


def attach_hypothesis_reproduction(text: str) -> None:
    attach_text("hypothesis reproduction", text)


class _Shown:
    """A parameter value allure shows as is (it quotes plain strings: 'float32')."""

    def __init__(self, text) -> None:
        self.text = str(text)

    def __repr__(self) -> str:
        return self.text


def parameter(name: str, value, *, in_history: bool = False) -> None:
    """Show a parameter on the current test; by default it does not split the test's history
    (hypothesis draws new shapes every run; the test is still the same test)."""
    if active():
        allure.dynamic.parameter(name, _Shown(value), excluded=not in_history)


def label(name: str, *values: str) -> None:
    if active() and values:
        allure.dynamic.label(name, *values)


def attach_judgement(judgement, run, *, worst: int = 20) -> None:
    """Attach the evidence of a failed value check: the error/bound heatmap with the tile grid,
    the worst elements, the kernel source and the compiler's resource report.

    ``judgement``: gemmcheck.oracle.Judgement (``error_map``, ``findings``, ``message()``);
    ``run``: the gemmcheck.harness.Run it judged.
    """
    if not active():
        return
    instance = run.instance
    for name, value in (("M", run.M), ("N", run.N), ("K", run.K)):
        parameter(name, value)
    error_map = np.asarray(judgement.error_map, dtype=np.float64)
    title = (f"{instance.id}  M{run.M} N{run.N} K{run.K}  grid {tuple(run.grid)} "
             f"block {tuple(run.block)}")
    attach_png("error / bound heatmap", heatmap_png(error_map, instance.tile,
                                                    unwritten=run.unwritten, title=title))
    if not hasattr(judgement, "worst_table"):   # the oracle attaches its own, with the bound
        attach_csv("worst elements", worst_elements_csv(error_map, run, n=worst,
                                                        expected=getattr(judgement, "expected", None)))
    attach_instance_evidence(instance)


def attach_instance_evidence(instance) -> None:
    """The kernel's source and ptxas's resource report for one instantiation."""
    if not active():
        return
    excerpt, where = kernel_source_excerpt(instance.spec.source, instance.spec.entry)
    attach_text(f"kernel source: {instance.spec.entry} ({where})", excerpt)
    attach_text("compiler resource report", resource_report(instance))


# -- heatmap --------------------------------------------------------------------------------

UNWRITTEN_COLOUR = "#000000"   # never written: still the poison
NAN_COLOUR = "#ff00ff"         # inf ratio that is not unwritten: a NaN where none belongs
MAX_CELLS = 160                # larger maps are max-pooled so one bad element stays visible


def heatmap_png(error_map: np.ndarray, tile: int, *, unwritten: np.ndarray | None = None,
                title: str = "", max_cells: int = MAX_CELLS) -> bytes:
    """A PNG of error/bound over the output matrix with the TILE grid drawn on it.

    Finite ratios are coloured on a log scale centred on 1 (the bound): blue is well
    inside it, red outside. ``inf`` marks elements with no finite error: black where
    ``unwritten`` says the poison survived, magenta otherwise (a NaN mismatch). Maps
    with more than ``max_cells`` a side are max-pooled by a power of two (so pooled cells
    line up with power-of-two tiles; inf wins), so no bad element shrinks below a few pixels.
    """
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap, TwoSlopeNorm
    from matplotlib.patches import Patch

    error_map = np.asarray(error_map, dtype=np.float64)
    if error_map.ndim != 2 or error_map.size == 0:
        raise ValueError(f"error_map must be a non-empty 2-D array, got shape {error_map.shape}")
    M, N = error_map.shape
    unwritten = (np.zeros((M, N), bool) if unwritten is None
                 else np.asarray(unwritten, dtype=bool).reshape(M, N))
    bad_nan = np.isinf(error_map) & ~unwritten
    finite = np.where(np.isfinite(error_map), error_map, np.nan)
    counts = (int(np.count_nonzero(np.isfinite(error_map) & (error_map > 1))),
              int(np.count_nonzero(unwritten)), int(np.count_nonzero(bad_nan)))

    step = 1
    while -(-max(M, N) // step) > max_cells:
        step *= 2
    if step > 1:
        finite = _pool(finite, step, np.fmax, np.nan)
        unwritten = _pool(unwritten, step, np.logical_or, False)
        bad_nan = _pool(bad_nan, step, np.logical_or, False)

    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log10(finite)
    lo, hi = -4.0, 4.0
    log_ratio = np.clip(np.where(finite == 0, lo, log_ratio), lo, hi)

    fig, ax = plt.subplots(figsize=(8.5, 7.2), dpi=100)
    extent = (0, N, M, 0)  # element coordinates: column j to the right, row i downwards
    image = ax.imshow(log_ratio, cmap="RdYlBu_r", norm=TwoSlopeNorm(vmin=lo, vcenter=0, vmax=hi),
                      interpolation="nearest", extent=extent, aspect="auto")
    for mask, colour in ((unwritten, UNWRITTEN_COLOUR), (bad_nan, NAN_COLOUR)):
        if mask.any():
            ax.imshow(np.ma.masked_where(~mask, mask.astype(float)),
                      cmap=ListedColormap([colour]), interpolation="nearest", extent=extent,
                      aspect="auto", vmin=0, vmax=1)
    lines = max(M, N) / tile
    if lines <= 128:
        for x in range(tile, N, tile):
            ax.axvline(x, color="#202020", alpha=0.8, linewidth=0.9 if lines < 32 else 0.4)
        for y in range(tile, M, tile):
            ax.axhline(y, color="#202020", alpha=0.8, linewidth=0.9 if lines < 32 else 0.4)
        grid_note = f"grid: TILE {tile}"
    else:
        grid_note = f"TILE {tile} grid omitted ({int(lines)} tiles a side)"
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label("error / bound (log10); > 0 breaks the bound")
    legend = [Patch(facecolor=UNWRITTEN_COLOUR, label="unwritten (poison survived)"),
              Patch(facecolor=NAN_COLOUR, label="NaN where none belongs"),
              Patch(facecolor="#a50026", label="error > bound")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3,
              fontsize=8, frameon=False)
    pooled = f", max-pooled {step}x{step}" if step > 1 else ""
    over, n_unwritten, n_nan = counts
    ax.set_title(f"{title}\nof {M * N} elements: {over} over the bound, {n_unwritten} unwritten, "
                 f"{n_nan} NaN; {grid_note}{pooled}", fontsize=9)
    from matplotlib.ticker import MaxNLocator

    from matplotlib.ticker import MultipleLocator

    for axis, size in ((ax.xaxis, N), (ax.yaxis, M)):
        per = 1   # ticks on tile boundaries, at most ~10 of them
        while size / (tile * per) > 10:
            per *= 2
        axis.set_major_locator(MultipleLocator(tile * per) if size >= tile
                               else MaxNLocator(integer=True))
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def _pool(a: np.ndarray, step: int, op, fill):
    M, N = a.shape
    pm, pn = -(-M // step) * step, -(-N // step) * step
    padded = np.full((pm, pn), fill, dtype=a.dtype)
    padded[:M, :N] = a
    blocks = padded.reshape(pm // step, step, pn // step, step)
    return op.reduce(op.reduce(blocks, axis=3), axis=1)


def worst_elements_csv(error_map: np.ndarray, run, *, n: int = 20, expected=None) -> str:
    """The ``n`` worst elements (inf first) as CSV: index, tile, ratio, what was stored."""
    error_map = np.asarray(error_map, dtype=np.float64)
    tile = run.instance.tile
    flat = np.where(np.isnan(error_map), np.inf, error_map).reshape(-1)
    order = np.argsort(-flat, kind="stable")[:n]
    header = ["i", "j", "tile_i", "tile_j", "error/bound", "stored", "bits", "unwritten"]
    if expected is not None:
        header.insert(6, "expected")
    rows = [",".join(header)]
    C, bits = run.C, run.C_bits
    width = bits.dtype.itemsize * 2
    for index in order:
        i, j = divmod(int(index), error_map.shape[1])
        row = [i, j, i // tile, j // tile, f"{error_map[i, j]:.4g}", repr(C[i, j].item()),
               f"0x{int(bits[i, j]):0{width}x}", bool(run.unwritten[i, j])]
        if expected is not None:
            row.insert(6, repr(np.asarray(expected)[i, j].item()))
        rows.append(",".join(str(v) for v in row))
    return "\n".join(rows) + "\n"


def kernel_source_excerpt(source: Path, entry: str) -> tuple[str, str]:
    """The source of ``entry`` with line numbers, and 'file:first-last'.

    Follows what a reviewer would: the ``__global__`` function (or the macro line that
    stamps it out, with the macro), then the ``__device__`` bodies it calls, one level
    deep. Lines naming a macro argument (the flaw a broken variant selects) are marked >>.
    """
    lines = Path(source).read_text().splitlines()
    spans: list[tuple[int, int]] = []
    marks: set[str] = set()
    own = _function_span(lines, entry)
    if own is None:
        call = re.compile(rf"^\s*([A-Z_][A-Z0-9_]*)\(\s*{re.escape(entry)}\s*(?:,\s*(.*))?\)")
        for k, line in enumerate(lines):
            m = call.match(line)
            if m:
                spans.append((k, k))
                marks |= {a.strip() for a in (m.group(2) or "").split(",") if a.strip()}
                macro = _macro_span(lines, m.group(1))
                if macro:
                    spans.insert(0, macro)
                break
    else:
        spans.append(own)
    called = set()
    for first, last in list(spans):
        called |= set(re.findall(r"\b([A-Za-z_]\w*)\s*<[^;<>(){}]*>\s*\(", "\n".join(lines[first:last + 1])))
    for name in sorted(called - {entry}):
        span = _function_span(lines, name, qualifier="__device__")
        if span and span not in spans:
            spans.insert(0, span)
    if not spans:
        return f"{entry}: not found in {Path(source).name}", Path(source).name
    spans.sort()
    out, previous = [], None
    for first, last in spans:
        if previous is not None and first > previous + 1:
            out.append("  ...")
        for k in range(first, last + 1):
            flag = ">>" if marks and any(re.search(rf"\b{re.escape(m)}\b", lines[k]) for m in marks) else "  "
            out.append(f"{flag}{k + 1:5d}  {lines[k]}")
        previous = last
    return "\n".join(out), f"{Path(source).name}:{spans[0][0] + 1}-{spans[-1][1] + 1}"


def _function_span(lines: list[str], name: str, qualifier: str = "__global__"):
    """(first, last) line of the definition of function ``name`` with its template line."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    for k, line in enumerate(lines):
        if not pattern.search(line) or line.rstrip().endswith(";") or "#define" in line:
            continue
        head = " ".join(lines[max(0, k - 1):k + 1])
        if qualifier not in head:
            continue
        first = k
        while first > 0 and lines[first - 1].lstrip().startswith(("template", "__global__", "__device__")):
            first -= 1
        depth, opened = 0, False
        for last in range(k, len(lines)):
            depth += lines[last].count("{") - lines[last].count("}")
            opened = opened or "{" in lines[last]
            if opened and depth <= 0:
                return first, last
    return None


def _macro_span(lines: list[str], macro: str):
    for k, line in enumerate(lines):
        if re.match(rf"\s*#\s*define\s+{re.escape(macro)}\b", line):
            last = k
            while lines[last].rstrip().endswith("\\") and last + 1 < len(lines):
                last += 1
            return k, last
    return None


def resource_report(instance) -> str:
    """ptxas's report for one instantiation (gemmcheck.resources), or why there is none."""
    from gemmcheck import resources

    try:
        found = resources.compile_report(instance.spec.source, (instance.name_expression,))
    except Exception as exc:  # no NVRTC here, or the kernel does not compile
        return f"no resource report for {instance.name_expression}: {type(exc).__name__}: {exc}"
    r = found[instance.name_expression]
    return (f"{r.name_expression} on {r.arch}: {r.registers} registers, {r.shared_bytes} B static "
            f"shared memory, {r.stack_frame} B stack frame, {r.spill_stores} B spill stores, "
            f"{r.spill_loads} B spill loads, {r.barriers} barriers")


# -- defect categories ----------------------------------------------------------------------

def defect_message(defects: Defect | str | Iterable[Defect | str], text: str) -> str:
    """``"unwritten_output, wrong_values: <text>"``: the prefix categories.json matches."""
    if isinstance(defects, (Defect, str)):
        defects = [defects]
    names = [d.value if isinstance(d, Defect) else Defect(d).value for d in defects]
    return f"{', '.join(names)}: {text}"


@dataclass(frozen=True)
class Category:
    name: str
    defects: tuple[Defect, ...] = ()
    words: tuple[str, ...] = ()          # plain-language regexes (environment problems)
    statuses: tuple[str, ...] = ("failed", "broken", "skipped")
    description: str = ""

    def message_regex(self) -> str:
        """Matches a message carrying one of our defects in its prefix (see the module doc), or
        one of the words. Wrapped in [\\s\\S]* so Allure 2 (whole-message match) and Allure 3
        (search) agree."""
        parts = []
        if self.defects:
            names = "|".join(d.value for d in self.defects)
            parts.append(rf"(?:^|\n|: |\n\n)(?:[a-z_]+, )*(?:{names})(?:, [a-z_]+)*: ")
        parts += self.words
        return r"[\s\S]*(?:" + "|".join(parts) + r")[\s\S]*"


# Order matters: a test goes to the first category that matches.
CATEGORIES = (
    Category("Broken variant not caught", (), (r"\[XPASS\(strict\)\]",), ("failed",),
             description="a deliberately broken kernel passed: a detector has a gap"),
    *(Category(name, defects.in_category(name), description=text)
      for name, text in defects.CATEGORIES.items()),
    Category("Environment problems", (), (
        r"no CUDA device", r"needs [\w-]+ on PATH", r"not found on PATH", r"BackendUnavailable",
        r"CUDARuntimeError", r"cudaErrorNoDevice", r"out of memory", r"CompileFailed",
        r"NVRTC"), description="the machine, not the kernel: no device, missing tools"),
)
assert {d for c in CATEGORIES for d in c.defects} == set(Defect), "every Defect needs a category"


def categories_json() -> list[dict]:
    """categories.json for the results directory (Allure 2 format; Allure 3 reads it too)."""
    return [{"name": c.name, "description": c.description, "matchedStatuses": list(c.statuses),
             "messageRegex": c.message_regex()} for c in CATEGORIES]


def allure3_categories() -> list[dict]:
    """The same categories for Allure 3's config: by defect label or by message, grouped by
    kernel so a reviewer reads 'Shared-memory race > matmul_broken_nobarrier'."""
    rules = []
    for c in CATEGORIES:
        matchers = [{"statuses": list(c.statuses), "message": c.message_regex()}]
        if c.name == "Broken variant not caught":
            matchers.insert(0, {"labels": {"kill": "^missed$"}})
        if c.defects:
            names = "|".join(d.value for d in c.defects)
            matchers.insert(0, {"labels": {"defect": f"^(?:{names})$"}})
        rules.append({"id": c.name.lower().replace(" ", "-"), "name": c.name,
                      "matchers": matchers, "groupBy": [{"label": "kernel"}],
                      "groupByMessage": False, "expand": True})
    return rules


def category_of(message: str, status: str = "failed") -> str | None:
    """The name of the first category whose regex matches (Python's re; tests use it)."""
    for c in CATEGORIES:
        if status in c.statuses and re.fullmatch(c.message_regex(), message or ""):
            return c.name
    return None


# -- environment and executor ---------------------------------------------------------------

def environment(gemm=None) -> dict[str, str]:
    """What ran the suite, for environment.properties (one line each). Keys are short: the
    report shows about twelve characters of a key."""
    from gemmcheck import device

    env: dict[str, str] = {}
    ok, why = device.cuda_device()
    if ok:
        try:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            name = props["name"]
            env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
            env["capability"] = f"{props['major']}.{props['minor']}"
            env["sm_count"] = str(props["multiProcessorCount"])
            env["gpu_memory"] = f"{props['totalGlobalMem'] / 2**30:.1f} GiB"
            env["cuda_driver"] = _cuda_version(cupy.cuda.runtime.driverGetVersion())
            env["cuda_runtime"] = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        except Exception as exc:
            env["gpu"] = f"unknown ({type(exc).__name__}: {exc})"
        smi = _nvidia_smi_driver()
        if smi:
            env["driver"] = smi
    else:
        env["gpu"] = f"none ({why})"
    for module in ("cupy", "numpy", "hypothesis", "pytest", "matplotlib"):
        env[module] = _version(module)
    env["python"] = platform.python_version()
    env["platform"] = platform.platform()
    sanitizer = shutil.which("compute-sanitizer")
    env["sanitizer"] = sanitizer or "not found on PATH"
    try:
        from hypothesis import settings

        env["hyp_profile"] = settings._current_profile or "default"
    except Exception:
        pass
    if gemm is not None:
        env["profile"] = gemm.profile.name
        env["backend"] = (gemm.backend.describe() if gemm.backend is not None
                                    else f"{gemm.backend_name}" + (f" ({gemm.backend_error})"
                                                                   if gemm.backend_error else ""))
        env["catalog"] = ", ".join(str(c) for c in gemm.catalogs)
    return env


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvidia_smi_driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in (module, f"{module}-cuda13x", f"{module}-cuda12x"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "not installed"


def properties_text(values: dict[str, str]) -> str:
    """Java .properties: keys and values escaped so any text survives."""
    def esc(s: str, key: bool) -> str:
        s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        s = s.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
        return s.replace(" ", "\\ ") if key else s
    return "".join(f"{esc(k, True)}={esc(str(v), False)}\n" for k, v in values.items())


def executor(environ=os.environ) -> dict | None:
    """executor.json for the CI we run under (GitHub Actions, GitLab CI, Jenkins, generic CI)."""
    if environ.get("GITHUB_ACTIONS") == "true":
        server, repo, run = (environ.get("GITHUB_SERVER_URL", "https://github.com"),
                             environ.get("GITHUB_REPOSITORY", ""), environ.get("GITHUB_RUN_ID", ""))
        url = f"{server}/{repo}/actions/runs/{run}" if repo and run else ""
        return _executor("GitHub Actions", "github", url, environ.get("GITHUB_RUN_NUMBER"),
                         f"{environ.get('GITHUB_WORKFLOW', '')} #{environ.get('GITHUB_RUN_NUMBER', '')}",
                         url)
    if environ.get("GITLAB_CI") == "true":
        return _executor("GitLab CI", "gitlab", environ.get("CI_PROJECT_URL", ""),
                         environ.get("CI_PIPELINE_IID"), f"{environ.get('CI_JOB_NAME', '')} "
                         f"#{environ.get('CI_PIPELINE_IID', '')}", environ.get("CI_JOB_URL", ""))
    if environ.get("JENKINS_URL") or environ.get("BUILD_URL"):
        return _executor("Jenkins", "jenkins", environ.get("JENKINS_URL", ""),
                         environ.get("BUILD_NUMBER"), environ.get("BUILD_TAG", environ.get("JOB_NAME", "")),
                         environ.get("BUILD_URL", ""))
    if environ.get("CI", "").lower() in ("true", "1", "yes"):
        return _executor("CI", "ci", "", None, environ.get("CI_BUILD_NAME", ".ci/run"), "")
    return None


def _executor(name, kind, url, order, build_name, build_url) -> dict:
    data = {"name": name, "type": kind, "url": url, "buildName": build_name.strip(),
            "buildUrl": build_url, "reportName": "gemmcheck"}
    if order and str(order).isdigit():
        data["buildOrder"] = int(order)
    return {k: v for k, v in data.items() if v not in ("", None)}


def write_result_metadata(results_dir: Path, gemm=None, environ=os.environ) -> None:
    """environment.properties, categories.json and (in CI) executor.json into ``results_dir``."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "environment.properties").write_text(properties_text(environment(gemm)))
    (results_dir / "categories.json").write_text(json.dumps(categories_json(), indent=2))
    info = executor(environ)
    if info:
        (results_dir / "executor.json").write_text(json.dumps(info, indent=2))


# -- verdict summary ------------------------------------------------------------------------

SCHEMA_VERSION = 1


def summarize(instances, verdicts) -> list[dict]:
    """Per instantiation: how many checks, which defects (with counts), and whether that is
    what the catalog declares. ``instances``: every instantiation the run selected."""
    by_id: dict[str, list] = {}
    for v in verdicts:
        by_id.setdefault(v.instance, []).append(v)
    rows, seen = [], set()
    known = {i.id: i for i in instances}
    for inst_id in [i.id for i in instances] + [v.instance for v in verdicts]:
        if inst_id in seen:
            continue
        seen.add(inst_id)
        mine = by_id.get(inst_id, [])
        inst = known.get(inst_id)
        first = mine[0] if mine else None
        defects = Counter(f.defect.value if isinstance(f.defect, Defect) else str(f.defect)
                          for v in mine for f in {f.defect: f for f in v.findings}.values())
        expect = inst.spec.expect if inst else "unknown"
        if not mine:
            verdict, status = "not_checked", "not_checked"
        else:
            verdict = "correct" if not defects else "defective"
            if expect == "correct":
                status = "as_expected" if not defects else "unexpected"
            else:
                status = "as_expected" if expect in defects else "unexpected"
        rows.append({
            "kernel": inst.spec.name if inst else first.kernel,
            "instance": inst_id,
            "name_expression": inst.name_expression if inst else first.name_expression,
            "dtype": inst.dtype if inst else first.dtype,
            "tile": inst.tile if inst else first.tile,
            "expect": expect,
            "verdict": verdict,
            "defects": dict(sorted(defects.items())),
            "checks": len(mine),
            "checks_failed": sum(1 for v in mine if v.findings),
            "status": status,
        })
    return rows


def verdicts_document(instances, verdicts, *, run_info: dict | None = None) -> dict:
    """reports/verdicts.json (schema in README.md, 'Reports')."""
    return {
        "schema_version": SCHEMA_VERSION,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run": run_info or {},
        "instances": summarize(instances, verdicts),
        "verdicts": [v.to_json() for v in verdicts],
    }


def write_verdicts(path: Path, document: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


def verdict_table(rows: list[dict]) -> list[str]:
    """The terminal summary: one line per instantiation."""
    header = ("instantiation", "expect", "verdict", "checks", "status")
    table = [header]
    for r in sorted(rows, key=lambda r: (r["expect"] != "correct", r["kernel"], r["dtype"], r["tile"])):
        found = (", ".join(f"{d} x{n}" for d, n in r["defects"].items()) if r["defects"]
                 else r["verdict"])
        table.append((r["instance"], r["expect"], found, str(r["checks"]), r["status"]))
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def _json_default(value):
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


# -- is a results directory well formed? ---------------------------------------------------

REQUIRED_LABELS = ("epic", "feature", "story", "severity")
INSTANCE_LABELS = ("kernel", "instantiation", "tag")


def validate_results(results_dir: Path) -> list[str]:
    """Problems with an allure-results directory, one line each (empty: well formed).

    Every result parses and has epic/feature/story/severity labels; a result with an
    instantiation parameter also has kernel/instantiation/tag labels; every attachment a
    result or container names exists; environment.properties and categories.json exist.
    """
    results_dir = Path(results_dir)
    problems: list[str] = []
    if not results_dir.is_dir():
        return [f"{results_dir}: not a directory"]
    results = sorted(results_dir.glob("*-result.json"))
    if not results:
        problems.append(f"{results_dir}: no *-result.json files")
    for name in ("environment.properties", "categories.json"):
        if not (results_dir / name).is_file():
            problems.append(f"{results_dir}: {name} missing")
    if (results_dir / "categories.json").is_file():
        try:
            cats = json.loads((results_dir / "categories.json").read_text())
            for c in cats:
                re.compile(c["messageRegex"])
        except (ValueError, KeyError, TypeError, re.error) as exc:
            problems.append(f"categories.json: {type(exc).__name__}: {exc}")

    def attachments(node):
        for a in node.get("attachments", []) or []:
            yield a
        for key in ("steps", "befores", "afters"):
            for child in node.get(key, []) or []:
                yield from attachments(child)

    for path in results + sorted(results_dir.glob("*-container.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            problems.append(f"{path.name}: not JSON: {exc}")
            continue
        for a in attachments(data):
            if not (results_dir / a.get("source", "")).is_file():
                problems.append(f"{path.name}: attachment {a.get('name')!r} -> {a.get('source')} missing")
        if not path.name.endswith("-result.json"):
            continue
        labels = {label["name"] for label in data.get("labels", [])}
        missing = [n for n in REQUIRED_LABELS if n not in labels]
        params = {p["name"] for p in data.get("parameters", [])}
        # An instance-parametrized test, unless pytest found no instance for it ([NOTSET]).
        if "kernel" in labels or (params & {"reference", "broken", "any_kernel"}
                                  and not data.get("name", "").endswith("[NOTSET]")):
            missing += [n for n in INSTANCE_LABELS if n not in labels]
            missing += [f"parameter {n}" for n in ("kernel", "instantiation", "dtype", "TILE", "profile")
                        if n not in params]
        if missing:
            problems.append(f"{path.name} ({data.get('name')}): missing {', '.join(missing)}")
        if data.get("status") not in ("passed", "failed", "broken", "skipped", "unknown"):
            problems.append(f"{path.name} ({data.get('name')}): status {data.get('status')!r}")
    return problems


# -- HTML build (Allure 3 CLI) --------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
ANALYTICS = re.compile(
    r"\s*<script async src=\"https://www\.googletagmanager\.com/[^\"]*\"></script>"
    r"\s*<script>(?:(?!</script>).)*?gtag\((?:(?!</script>).)*?</script>", re.S)


def allure_cli(root: Path = ROOT) -> Path:
    cli = root / "node_modules" / ".bin" / "allure"
    if not cli.exists():
        raise SystemExit(f"{cli} not found: run `npm ci` in {root} first (package.json pins the "
                         "Allure 3 CLI)")
    return cli


def allure_config(output: Path, history: Path, *, single_file: bool, name: str) -> dict:
    return {
        "name": name,
        "output": str(output),
        "historyPath": str(history),
        "categories": allure3_categories(),
        "plugins": {"awesome": {"options": {
            "reportName": name,
            "singleFile": single_file,
            "groupBy": ["feature", "story"],
        }}},
    }


def strip_analytics(html: str) -> str:
    """Remove the Google Analytics tag the Allure 3 report template always adds."""
    return ANALYTICS.sub("", html)


def build_html(results: Path, output: Path, *, history: Path, single_file: bool = False,
               name: str = "gemmcheck", root: Path = ROOT) -> Path:
    """Build the HTML report from an allure-results directory, offline; return index.html."""
    results, output, history = Path(results).resolve(), Path(output).resolve(), Path(history).resolve()
    if not results.is_dir() or not any(results.glob("*-result.json")):
        raise SystemExit(f"{results}: no allure results (*-result.json); run pytest first")
    cli = allure_cli(root)
    history.parent.mkdir(parents=True, exist_ok=True)
    config = output.parent / f".allurerc-{output.name}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(allure_config(output, history, single_file=single_file, name=name),
                                 indent=2))
    if output.exists():
        shutil.rmtree(output)
    env = dict(os.environ, NO_UPDATE_NOTIFIER="1", CI=os.environ.get("CI", "true"))
    proc = subprocess.run([str(cli), "generate", str(results), "--config", str(config),
                           "--output", str(output)], cwd=root, env=env, text=True,
                          capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"allure generate failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    index = output / "index.html"
    for page in output.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        cleaned = strip_analytics(text)
        if "googletagmanager" in cleaned:
            raise SystemExit(f"{page}: an analytics script is left after stripping; "
                             "update gemmcheck.report.ANALYTICS for this Allure version")
        if cleaned != text:
            page.write_text(cleaned, encoding="utf-8")
    return index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmcheck.report",
                                     description="gemmcheck reports")
    sub = parser.add_subparsers(dest="command", required=True)
    html = sub.add_parser("html", help="build the allure HTML report (Allure 3 CLI, offline)")
    html.add_argument("--results", type=Path, default=ROOT / "reports" / "allure-results",
                      metavar="DIR", help="allure results (default: reports/allure-results)")
    html.add_argument("--output", type=Path, default=None, metavar="DIR",
                      help="report directory (default: reports/allure-report, or "
                           "reports/allure-single with --single-file)")
    html.add_argument("--history", type=Path, default=ROOT / "reports" / "allure-history.jsonl",
                      metavar="FILE", help="Allure 3 history, appended on every build so trends "
                                           "show (default: reports/allure-history.jsonl)")
    html.add_argument("--single-file", action="store_true",
                      help="one self-contained index.html")
    html.add_argument("--name", default="gemmcheck", help="report name (default: gemmcheck)")
    check = sub.add_parser("check", help="check that an allure-results directory is well formed")
    check.add_argument("results", type=Path, nargs="?", default=ROOT / "reports" / "allure-results")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = validate_results(args.results)
        for line in problems:
            print(line)
        print(f"{args.results}: {'well formed' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    output = args.output or ROOT / "reports" / ("allure-single" if args.single_file else "allure-report")
    index = build_html(args.results, output, history=args.history, single_file=args.single_file,
                       name=args.name)
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
