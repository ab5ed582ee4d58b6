"""One way to compile a kernel source: NVRTC through cuda.core, to a cubin.

The GPU backend loads exactly these cubins, and the static resource checks read
ptxas's report of the same compile, so the resource table describes the very
binary that runs. We do not let CuPy compile: CuPy appends `-ftz=true` to every
NVRTC compile, which flushes float32 subnormals to zero; nvcc's default (and
ours) keeps them, as IEEE 754 says.

Builds are cached on disk by (source, options, target, NVRTC version), then name
expressions (cached_build, which nvcc's builds share): a later run pays nothing for an
unchanged source, and one process of a run builds what all of them ask for.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.compile import buildlock, device_includes, diagnostics, toolkit
from gemmcheck.compile.prelude import PRELUDE
from gemmcheck.contract import cuda_source
from gemmcheck.phases import phase, timed

# The options every build uses, spelled for cuda.core's ProgramOptions.
# ftz=False is NVRTC's default too; it is written out because it is a claim the
# special-value tests rely on.
MAX_ERROR_LINES = 40   # of a compiler log on the terminal; the whole log goes to the report
BASE_OPTIONS = dict(std="c++17", ftz=False, ptxas_options=["-v"])


_KEEP_ALIVE: list = []
_DECISIONS = device_includes.Decisions(lambda: cache_dir().parent / "includes")


class CompileError(RuntimeError):
    """NVRTC rejected a source; the message carries the first lines of its log, ``log`` all of it."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Compiled:
    cubin: bytes
    mangled: dict[str, str]   # name expression -> mangled symbol
    log: str                  # NVRTC + ptxas -v output
    arch: str


def cache_dir() -> Path:
    root = os.environ.get("GEMMCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "gemmcheck")
    return Path(root) / "cubin"


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@timed("compile")
def compile_source(source: Path, name_expressions: tuple[str, ...], arch: str,
                   defines: tuple[tuple[str, int], ...] = (), compiler: str | None = None,
                   linked: tuple[Path, ...] = ()) -> Compiled:
    """Compile `name_expressions` of `source` for `arch` (e.g. "sm_90"), cached on disk, with
    `compiler` ("nvcc" or "nvrtc"; None: the run's choice, gemmcheck.compile.choice). `linked`:
    other sources whose device code the kernel calls (nvcc only: relocatable device code).
    nvcc builds the source as written (gemmcheck.compile.nvcc_build); NVRTC as below."""
    from gemmcheck.compile import choice

    compiler = compiler or choice.resolve(linked=bool(linked))
    if compiler == "nvcc":
        from gemmcheck.compile import nvcc_build

        return nvcc_build.compile_source(source, name_expressions, arch, defines, linked)
    if linked:
        raise CompileError(f"{source.name}: its device code links other sources ({', '.join(Path(p).name for p in linked)}); "
                           "NVRTC cannot link them: build it with nvcc (compiler = \"nvcc\")")
    return _compile_with_nvrtc(source, name_expressions, arch, defines)


def _compile_with_nvrtc(source: Path, name_expressions: tuple[str, ...], arch: str,
                        defines: tuple[tuple[str, int], ...] = ()) -> Compiled:
    """NVRTC's device compile as nvcc makes it: only the device part is compiled
    (gemmcheck.contract.cuda_source.device_part: host functions blanked, in the user's own
    headers too), the prelude comes first (--pre-include: glibc's uint, CUDART_* ...), the
    #include lines NVRTC cannot open are left out (gemmcheck.compile.device_includes), and the source's directory,
    the catalog's include_dirs, the CCCL and CUDA runtime headers are searched. `defines`
    are passed as -D NAME=value.
    """
    try:
        text = cuda_source.read_source(source)
    except (cuda_source.SourceNotText, OSError) as exc:
        raise CompileError(str(exc)) from None
    files = device_includes.DeviceFiles(cuda_source.device_part(text, compiler="nvrtc"),
                                        cuda_source.include_dirs_of(source), cache_dir().parent / "headers",
                                        name=str(source))
    include = [str(d) for d in cuda_source.include_dirs_of(source)] + list(toolkit.include_dirs())
    options = [BASE_OPTIONS, _no_nvrtc_cache(), include, [list(d) for d in defines], nvrtc_version(),
               PRELUDE.read_text()]
    unit = cache_dir() / f"nvrtc-{cache_key([files.fingerprint(), str(source), arch, options])}"

    def build():
        return _compile_device_part(source, files, name_expressions, arch, include, defines,
                                    _DECISIONS.key(files.fingerprint(), str(source), arch, options)), {}
    return cached_build(unit, name_expressions, arch, build)


def cached_build(unit: Path, names, arch: str, build) -> Compiled:
    """The build of `names` in cache folder `unit` (one per source, the files it reads and the
    options: everything that decides its binary but the names), made by `build()` (which
    returns the Compiled and the {path: sha256} of files it read that the folder's key does
    not cover) where the cache has none. One process of a run builds an entry while the
    others wait for it (buildlock: pytest-xdist's workers each asked NVRTC for every unit, the
    ci profile's compile suite 8 times over), and any build of the unit that holds all of
    `names` serves them: an isolated child, a worker or a kill-matrix row asking for a few
    instantiations of a source takes the build the session made of all of them (nvcc costs
    seconds a process, and under compute-sanitizer far more)."""
    entry = unit / cache_key(sorted(names))
    found = _covering(unit, entry, names, arch)
    if found is not None:
        return found
    with buildlock.exclusive(entry):
        found = _covering(unit, entry, names, arch)   # another process may have built it meanwhile
        if found is not None:
            return found
        compiled, depends = build()
        try:
            entry.mkdir(parents=True, exist_ok=True)
            # whole files only: other processes read this cache while one writes it
            buildlock.write_atomic(entry / "kernel.cubin", compiled.cubin)
            buildlock.write_atomic(entry / "meta.json", json.dumps(
                {"mangled": compiled.mangled, "log": compiled.log, "depends": depends}).encode())
        except OSError:
            pass   # a read-only cache only costs time
    return compiled


def cache_key(value) -> str:
    """A build cache folder's name for `value` (JSON): the first 32 hex digits of its sha256."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:32]


def _covering(unit: Path, entry: Path, names, arch: str) -> Compiled | None:
    """The cached build of these names, or any other build of the unit that holds them all."""
    found = _cached(entry, arch)
    if found is not None or not unit.is_dir():
        return found
    for other in sorted(unit.iterdir()):
        if other != entry and (found := _cached(other, arch)) is not None and set(names) <= set(found.mangled):
            return found
    return None


def _cached(entry: Path, arch: str) -> Compiled | None:
    try:
        meta = json.loads((entry / "meta.json").read_text())
        if any(digest(path) != known for path, known in meta.get("depends", {}).items()):
            return None   # a file it read has changed since
        return Compiled((entry / "kernel.cubin").read_bytes(), meta["mangled"], meta["log"], arch)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def digest(path: str) -> str | None:
    """The sha256 of the file at `path`, or None where it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _compile_device_part(source: Path, files: device_includes.DeviceFiles, name_expressions, arch: str,
                         include, defines, decision_key: str) -> Compiled:
    """Compile with the #include lines NVRTC cannot open left out, one by one as NVRTC reports
    them; the lines left out are remembered by key (the device texts and the options), so the
    source's other units and sessions compile once."""
    known = _DECISIONS.get(decision_key)
    left = known or ()

    def probe(program: str) -> str:
        return _front_end_log(source, program, arch, include, defines)

    for _ in range(files.include_count() + 1):
        try:
            compiled = _compile(source, files.program(left), name_expressions, arch, include, defines)
        except CompileError as exc:
            more = None if known is not None else files.next_left_out(str(source), exc.log, probe, left)
            if more is None:
                if known is None and left:
                    _DECISIONS.put(decision_key, left)
                raise CompileError(str(exc) + device_includes.explain(left), exc.log) from None
            left += (more,)
        else:
            if known is None:
                _DECISIONS.put(decision_key, left)
            return compiled
    raise AssertionError("unreachable: each round leaves out one more #include line")


def build_many(jobs) -> None:
    """Build several ``(source, name_expressions, arch, defines[, compiler, linked])`` into the
    disk cache at once,
    side by side on the host's cores (NVRTC compiles without holding the GIL), so the builds
    that follow one by one find them there: a session's units took seconds each in turn (5 s
    for the builtin catalog's largest on the H200). A build that fails is left to its caller,
    which meets the error itself (failures are not cached)."""
    jobs = list(dict.fromkeys((source, tuple(names), arch, tuple(defines), *rest) for source, names, arch, defines, *rest
                              in jobs))
    if len(jobs) < 2:
        return
    # initialize what the builds share before the threads start
    from gemmcheck.compile import choice

    _no_nvrtc_cache(), toolkit.include_dirs(), nvrtc_version(), choice.installed()

    def one(job) -> None:
        try:
            compile_source(*job)
        except CompileError:
            pass
    from concurrent.futures import ThreadPoolExecutor

    with phase("compile"), ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1),
                                              thread_name_prefix="nvrtc") as pool:
        list(pool.map(one, jobs))


def target(instance, arch: str) -> str:
    """The compile target of `instance`: the catalog's ``arch`` (sm_90a for wgmma) when it
    names one, else `arch` (the device's own, or the static checks' default)."""
    return instance.spec.arch or arch


def build_units_of(instances, arch: str, run_choice: str | None = None) -> dict[tuple, list[str]]:
    """Build the units of these instantiations side by side (build_many), each unit with the
    name expressions of all of them it holds, as one compile per target (`arch`, or the
    catalog's own) and compiler (gemmcheck.compile.choice.of: `run_choice`, or the entry's pin);
    returns (source, defines, target, compiler, linked sources) -> sorted names."""
    units = units_of(instances, arch, run_choice)
    build_many(unit_jobs(units))
    return units


def units_of(instances, arch: str, run_choice: str | None = None) -> dict[tuple, list[str]]:
    """The build units of these instantiations (build_units_of's answer), built or not."""
    from gemmcheck.compile import choice
    from gemmcheck.contract.catalog import by_build_unit

    units: dict[tuple, set[str]] = {}
    for (source, defines), group in by_build_unit(instances).items():
        for inst in group:
            unit = (source, defines, target(inst, arch), choice.of(inst, run_choice), linked_sources(inst))
            units.setdefault(unit, set()).add(inst.name_expression)
    return {unit: sorted(names) for unit, names in units.items()}


def unit_jobs(units: dict[tuple, list[str]]) -> list[tuple]:
    """build_many's jobs for units_of's units."""
    return [(source, names, target_arch, defines, compiler, linked)
            for (source, defines, target_arch, compiler, linked), names in units.items()]


def linked_sources(instance) -> tuple[Path, ...]:
    """The other sources whose device code `instance` links (its catalog's ``sources``)."""
    return tuple(getattr(instance.spec, "sources", ()))


def first_errors(log: str, limit: int = MAX_ERROR_LINES) -> str:
    """The first `limit` lines of a compiler log that say something, starting at the first error."""
    lines = [line.rstrip() for line in log.replace("\x00", "").splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if "error" in line), 0)
    shown = lines[start:start + limit]
    more = len(lines) - start - len(shown)
    return "\n".join(shown + ([f"... ({more} more lines)"] if more > 0 else []))


_IMPORT_LOCK = threading.Lock()


def _cuda_core():
    """cuda.core, imported by one thread at a time: its package copies the versioned module's
    names into itself while importing, so a second thread importing it at once can find it
    half filled (``cannot import name 'ProgramOptions' from 'cuda.core.cu13'``; seen when
    threads build units side by side)."""
    with _IMPORT_LOCK:
        import cuda.core
    return cuda.core


@functools.lru_cache(maxsize=None)
def _no_nvrtc_cache() -> dict:
    """NVRTC >= 12.9 keeps its own build cache, and a build it serves from there prints no
    ptxas -v report (NVIDIA/Fuser#4694, cuda-python#1124): on the H200, with -n 2, one
    worker's resource check read an empty report for a kernel the other had just built.
    gemmcheck caches builds itself, so NVRTC's cache is turned off where it exists."""
    ProgramOptions = _cuda_core().ProgramOptions

    major, minor = (int(p) for p in nvrtc_version().split("."))
    fields = getattr(ProgramOptions, "__dataclass_fields__", {})
    return {"no_cache": True} if (major, minor) >= (12, 9) and "no_cache" in fields else {}


def _options(source: Path, arch: str, include, defines, **extra):
    ProgramOptions = _cuda_core().ProgramOptions

    # The program's name is the user's path, so NVRTC's errors read file.cu(12), not default_program(12).
    return ProgramOptions(name=str(source), arch=arch, include_path=include or None, pre_include=str(PRELUDE),
                          define_macro=[f"{k}={v}" for k, v in defines] or None, **BASE_OPTIONS,
                          **_no_nvrtc_cache(), **extra)


def _front_end_log(source: Path, text: str, arch: str, include, defines) -> str:
    """NVRTC's log of a front-end-only compile of `text` (no code generated); "" when it compiles."""
    Program = _cuda_core().Program

    log = io.StringIO()
    program = None
    try:
        program = Program(text, "c++", options=_options(source, arch, include, defines, fdevice_syntax_only=True))
        program.compile("cubin", logs=log)
        return ""
    except Exception as exc:
        return log.getvalue() or str(exc)
    finally:
        if program is not None:
            _KEEP_ALIVE.append(program)


def _compile(source: Path, text: str, name_expressions, arch: str, include, defines) -> Compiled:
    Program = _cuda_core().Program

    options = _options(source, arch, include, defines)
    log = io.StringIO()
    program = None
    try:
        program = Program(text, "c++", options=options)
        code = program.compile("cubin", name_expressions=list(name_expressions), logs=log)
    except Exception as exc:
        full = diagnostics.from_nvrtc(log.getvalue() or str(exc), source)
        raise CompileError(f"{source.name}: NVRTC could not compile {', '.join(name_expressions)} "
                           f"for {arch}:\n{first_errors(full)}", full) from None
    finally:
        # cuda.core's Program.__dealloc__ raises (and prints a traceback) for a program whose
        # compile failed; such programs are kept for the session instead of collected.
        if program is not None:
            _KEEP_ALIVE.append(program)
    mangled = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in code.symbol_mapping.items()}
    return Compiled(bytes(code.code), mangled, log.getvalue().rstrip("\x00"), arch)
