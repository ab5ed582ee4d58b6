"""Building a catalog source with nvcc, to a cubin CuPy loads: the source as its author's
own build compiles it (host code, host prototypes, the toolkit's host API headers, nested
headers, explicit instantiations, ``extern "C"`` kernels).

The source is compiled unchanged, through a translation unit of gemmcheck's that includes
it and names each name expression in a marker kernel's template argument, so nvcc's front
end instantiates every one and says which symbol it is (gemmcheck.compile.symbols)::

    #include "/path/to/launcher.cu"
    template <int I, auto F> __global__ void gemmcheck_name_expression() {}
    template __global__ void gemmcheck_name_expression<0, &sgemm_tiled<32>>();

``nvcc -cubin -arch=<target> -Xptxas -v`` builds it; ptxas's report (the same form as
NVRTC's) names the kernels it compiled, the markers among them. A kernel whose device functions live in other files
(``sources`` in the catalog) is built as relocatable device code (``-rdc=true``), each
file on its own, and device-linked into one cubin (``nvcc -dlink -cubin``).

A header nvcc cannot open (``<cublas_v2.h>`` where cuBLAS is not installed) is looked for
in the other CUDA installations' include directories (a system CUDA's, the runtime
wheel's) and searched there after nvcc's own; where none has it, nvcc gets an empty
header in its place (searched last, so it never hides a real one), and a compile that
fails afterwards says which headers were empty, with nvcc's reason.

Builds are cached like NVRTC's (gemmcheck.compile.compiler.cached_build): by the source, the
files linked with it, target, options and nvcc's version, then the name expressions, and each
cached build is checked against the files nvcc read for it (``-MD``): an edited header,
however deeply nested, rebuilds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from gemmcheck.compile import buildlock, device_includes, diagnostics, nvcc_tool, symbols, toolkit
from gemmcheck.compile.compiler import (CompileError, Compiled, cache_dir, cache_key, cached_build, digest,
                                        first_errors)
from gemmcheck.contract import cuda_source

OPTIONS = ("-std=c++17", "-Xptxas", "-v")   # nvcc's defaults otherwise: -ftz=false, IEEE division
UNIT = "gemmcheck_unit.cu"
TIMEOUT_S = 600

_MISSING: dict[tuple, dict[str, object]] = {}   # (nvcc, include dirs, source) -> header -> directory | LeftOut
_MISSING_LOCK = threading.Lock()


def compile_source(source: Path, name_expressions, arch: str, defines=(), linked=()) -> Compiled:
    """Build `name_expressions` of `source` (and the device code of the `linked` sources) for
    `arch` with nvcc; cached on disk."""
    nvcc = _require()
    source, linked = Path(source).resolve(), tuple(Path(p).resolve() for p in linked)
    include = [str(d) for d in cuda_source.include_dirs_of(source)]
    options = [list(OPTIONS), include, [list(d) for d in defines], nvcc.build, nvcc.path]
    texts = [_read(p) for p in (source, *linked)]
    unit = cache_dir() / f"nvcc-{cache_key([str(source), [str(p) for p in linked], texts, arch, options])}"
    return cached_build(unit, name_expressions, arch,
                        lambda: _build(nvcc, source, tuple(name_expressions), arch, include, defines, linked))


def _require() -> nvcc_tool.Nvcc:
    try:
        return nvcc_tool.require()
    except nvcc_tool.NvccMissing as exc:
        raise CompileError(str(exc)) from None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise CompileError(f"{path}: cannot be read: {exc}") from None


def _build(nvcc, source: Path, names: tuple[str, ...], arch: str, include, defines, linked):
    """(Compiled, {path: sha256} of the user's files nvcc read). When the source as written
    does not compile and a header it includes was given as an empty one, its device part
    (host functions and prototypes blanked in it and in the user's headers, lines kept:
    gemmcheck.compile.device_includes.DeviceFiles) is tried before the source's own error is
    reported: host code that calls into a library not installed here (cuBLAS) stands in the
    way of no kernel."""
    try:
        return _build_from(nvcc, source, None, names, arch, include, defines, linked)
    except CompileError as exc:
        if "given to nvcc as empty headers" not in str(exc):
            raise
        # the user's headers too, at any depth: device copies (a header of host prototypes
        # that name cuBLAS's types), which keep their names and lines for errors
        device_only = device_includes.DeviceFiles(cuda_source.device_part(_read(source), compiler="nvrtc"),
                                                  include, cache_dir().parent / "headers").program(())
        try:
            return _build_from(nvcc, source, device_only, names, arch, include, defines, linked)
        except CompileError:
            raise exc from None


def _build_from(nvcc, source: Path, text: str | None, names, arch: str, include, defines, linked):
    """Build `source`, or `text` in its place (read as the source: its name and lines)."""
    with tempfile.TemporaryDirectory(prefix="gemmcheck-nvcc-") as work:
        work = Path(work)
        unit = work / UNIT
        included = source
        if text is not None:
            included = work / "source" / source.name
            included.parent.mkdir()
            included.write_text(f'#line 1 "{source}"\n' + text)
        markers = symbols.marker_declarations(names)
        unit.write_text("\n".join([f'#include "{included}"', *markers, ""]))
        names_by_line = {3 + i: name for i, name in enumerate(names)}   # line 2 declares the marker
        flags = [f"-arch={arch}", *OPTIONS, *(f"-I{d}" for d in include),
                 *(f"-D{k}={v}" for k, v in defines), *(["-rdc=true"] if linked else [])]

        def explain_unit(log: str) -> str:
            return diagnostics.from_unit(log, unit, source, names_by_line)

        parts = [(unit, work / "unit.cubin", explain_unit)]
        for number, other in enumerate(linked):
            parts.append((other, work / f"linked{number}.cubin", diagnostics.from_host_preprocessor))
        logs, depends, marked = [], {}, []
        for path, out, explain in parts:
            log = _run_with_headers(nvcc, [*flags, "-cubin", "-MD", "-MF", str(out) + ".d", "-o", str(out), str(path)],
                                    include, explain, source, names, arch)
            marked = marked or symbols.entries(log)   # the unit's: the first part
            logs.append(symbols.without_markers(log))
            depends.update(_user_files(Path(str(out) + ".d"), nvcc, exclude=work))
        cubin = work / "unit.cubin"
        if linked:
            cubin = work / "linked.cubin"
            log = _run(nvcc, [f"-arch={arch}", "-dlink", "-cubin", "-o", str(cubin),
                              *(str(out) for _, out, _ in parts)])
            if log.returncode:
                raise CompileError(f"{source.name}: nvcc could not device-link {', '.join(p.name for p in linked)} "
                                   f"with it for {arch}:\n{first_errors(log.stdout + log.stderr)}",
                                   log.stdout + log.stderr)
        full = "\n".join(logs)
        found = symbols.from_markers(names, marked)
        entries = symbols.entries(logs[0])
        missing = [n for n in names if found.get(n) not in entries]
        if missing:
            raise CompileError(f"{source.name}: nvcc built no kernel named {', '.join(missing)} for {arch}; "
                               f"it built {', '.join(symbols.readable(entries)) or 'no kernel'}", full)
        return Compiled(cubin.read_bytes(), found, full, arch), depends


def _run(nvcc, args) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([nvcc.path, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CompileError(f"nvcc did not finish within {TIMEOUT_S} s: {' '.join(args)}") from None


def _run_with_headers(nvcc, args, include, explain, source: Path, names, arch: str) -> str:
    """Run nvcc; for each header it cannot open, search the directory another CUDA
    installation has it in, or give it an empty one, and run again. Returns ptxas's log."""
    known = _known_missing(nvcc, include, source)
    for _ in range(64):
        extra = [d for d in known.values() if isinstance(d, str)]
        stubbed = tuple(v for v in known.values() if isinstance(v, device_includes.LeftOut))
        after = extra + ([str(_stub_dir(stubbed))] if stubbed else [])
        # searched after every other directory, so never in place of a header nvcc finds itself
        done = _run(nvcc, [*args, *(f for d in after for f in ("-Xcompiler", f"-idirafter,{d}"))])
        log = explain(done.stdout + done.stderr)
        if done.returncode == 0:
            return log
        failure = device_includes.cannot_open(log)
        header = failure and re.search(r'"([^"]+)"', failure.group(0).splitlines()[0])[1]
        if not failure or header in known:
            raise CompileError(f"{source.name}: nvcc could not compile {', '.join(names)} for {arch}:\n"
                               f"{first_errors(log)}{_explain(stubbed)}", log)
        elsewhere = toolkit.header_elsewhere(header, exclude=str(Path(nvcc.path).parent.parent))
        known[header] = elsewhere or device_includes.LeftOut(
            int(failure["line"]), _spelled(failure["file"], int(failure["line"]), header), failure.group(0),
            failure["file"])
    raise CompileError(f"{source.name}: nvcc still cannot open a header after 64 tries:\n{first_errors(log)}", log)


def _known_missing(nvcc, include, source: Path) -> dict[str, object]:
    """What this process learnt of the headers nvcc cannot open for `source` (its notes name
    the source's own #include lines), so its other units and instantiations build at once."""
    with _MISSING_LOCK:
        return _MISSING.setdefault((nvcc.path, tuple(include), str(source)), {})


def _spelled(file: str, line: int, header: str) -> str:
    """The #include's spelling at file:line (<x.h> or "x.h"), for the note."""
    try:
        text = Path(file).read_text(errors="replace").split("\n")[line - 1]
        return next((i.spelled for i in cuda_source.includes(text)), f"<{header}>")
    except (OSError, IndexError):
        return f"<{header}>"


def _stub_dir(stubbed) -> Path:
    """A directory of empty headers, one for each header in `stubbed`."""
    names = sorted(l.spelled[1:-1].strip() for l in stubbed)
    root = cache_dir().parent / "nvcc-empty-headers" / hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    for name in names:
        path = root / name
        if not path.is_file():
            buildlock.write_atomic(path, b"/* gemmcheck: an empty header in place of one nvcc cannot open */\n")
    return root


def _explain(stubbed) -> str:
    if not stubbed:
        return ""
    return ("\ngiven to nvcc as empty headers, as it cannot open them (if an error above needs one, this is why; "
            "a header of your own: add its directory to the catalog's include_dirs):\n"
            + "\n".join("  " + l.note() for l in stubbed))


def _user_files(depfile: Path, nvcc, exclude: Path) -> dict[str, str]:
    """{path: sha256} of the files a build read, from nvcc's -MD output, less the toolkit's,
    the system's and gemmcheck's own."""
    try:
        text = depfile.read_text()
    except OSError:
        return {}
    paths = text.replace("\\\n", " ").split(":", 1)[-1].split()
    skip = (str(Path(nvcc.path).parent.parent), "/usr/include", "/usr/lib", str(cache_dir().parent))
    out = {}
    for path in paths:
        path = os.path.realpath(path)
        if path.startswith((*skip, os.path.realpath(exclude))):
            continue
        found = digest(path)
        if found:
            out[path] = found
    return out
