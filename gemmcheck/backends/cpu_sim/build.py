"""Building for the CPU simulator: generated launchers, one g++ run per source, a cache.

Every catalog instantiation of one kernel source is compiled in ONE g++ invocation:
a generated translation unit includes the simulator's prelude, then the .cu file
unchanged (its ``#include <cuda_fp16.h>`` finds the fake headers in ``include/``),
then one ``extern "C"``-tabled launcher per instantiation, passing the kernel's
parameters in the order of its catalog roles; calling ``entry<...>(...)`` instantiates it.
Host code in the .cu (``main``, other host functions, host prototypes) is blanked first, lines
kept, and so are the definitions of the file's kernels the build does not instantiate, with
their explicit instantiations (isolate.py): a kernel nobody asked for, gpu_only or not, never
fails the build of its neighbours. The user's own headers (found beside the file including
them, in the source's directory or the catalog's include_dirs) are read the same way, at any
depth, through device copies (gemmcheck.compile.device_includes, as NVRTC's build reads them).
An ``#include`` g++ cannot find (a host library's header) is left out, in the source and in
those headers.

Builds are cached under the user cache directory (``$GEMMCHECK_CACHE_DIR``, else
``$XDG_CACHE_HOME/gemmcheck``, else ``~/.cache/gemmcheck``), keyed by a hash of the
generated source, the kernel source, the device texts of the user's headers it includes,
the directories searched, the simulator's own sources, the compiler and its flags. System
headers (the C++ library's) are not part of the key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gemmcheck.backends.cpu_sim import isolate
from gemmcheck.backends.cpu_sim.locating import buffer_names
from gemmcheck.compile import buildlock, device_includes
from gemmcheck.containment.tools import ToolFailure
from gemmcheck.contract import cuda_source, launch
from gemmcheck.phases import timed

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"
RUNTIME = HERE / "runtime.cpp"
COMMON_FLAGS = ("-std=c++17", "-fno-strict-aliasing", "-w")
# -fsanitize=thread is used for its instrumentation only: every load and store of the
# kernel calls __tsan_readN / __tsan_writeN, which the worker defines to track shared
# memory. The module is linked without the tsan runtime.
# -fsanitize=alignment likewise for its checks only: a load or store through a pointer not
# aligned to its type (a float4 at an address that is not a multiple of 16) calls
# __ubsan_handle_type_mismatch_v1, which the worker defines to stop the kernel as the GPU does.
MODULE_FLAGS = ("-O2", "-fPIC", "-fsanitize=thread,alignment", "-fno-threadsafe-statics")
WORKER_FLAGS = ("-O2", "-rdynamic")
ASAN_FLAGS = ("-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer", "-DCUDASIM_ASAN_RUNNER")
COMPILE_TIMEOUT_S = 600


class BuildTimeout(ToolFailure):
    """g++ outlived COMPILE_TIMEOUT_S: a host too busy or too slow, not the kernel's
    compile_error (a kernel g++ rejects fails in seconds)."""

    tool = "g++ (the CPU simulator's build)"
    todo = ("the host was too busy to build in time: run again with fewer workers (-n), or on a "
            "machine with more free cores")


class BuildError(RuntimeError):
    """g++ failed; the message carries the command's cause and the first lines of its log,
    `log` the whole of it."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def cache_dir() -> Path:
    root = os.environ.get("GEMMCHECK_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gemmcheck"
    return base / "cpu-sim"


@functools.lru_cache(maxsize=None)
def compiler() -> tuple[str, str]:
    """(path of g++, its version line). Raises BuildError when there is none usable."""
    cxx = shutil.which(os.environ.get("GEMMCHECK_CXX", "g++"))
    if cxx is None:
        raise BuildError("no C++ compiler: g++ not found on PATH (set GEMMCHECK_CXX to use another)")
    out = subprocess.run([cxx, "-dumpfullversion"], capture_output=True, text=True)
    version = out.stdout.strip()
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise BuildError(f"{cxx}: cannot read its version ({version!r})") from None
    if major < 12:
        raise BuildError(f"{cxx} is version {version}; the simulator needs g++ >= 12 "
                         "(_Float16 in C++ for __half)")
    return cxx, f"g++ {version}"


def _simulator_sources() -> bytes:
    return RUNTIME.read_bytes() + b"".join(p.read_bytes() for p in sorted(INCLUDE.rglob("*")) if p.is_file())


def _key(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(cuda_source.source_bytes(part) if isinstance(part, str) else part)   # a source's text: any bytes
        h.update(b"\0")
    return h.hexdigest()[:24]


_SHARED_ALIGNAS = re.compile(r"\b__shared__(?P<space>\s+)(?P<alignas>alignas\s*\((?:[^()]|\([^()]*\))*\))")


def device_files(source: Path, entries=None, missing=()) -> device_includes.DeviceFiles:
    """The source's device part and device copies of the user's own headers it includes, at any
    depth (found as g++ finds them: beside the including file, in the source's directory, in the
    catalog's include_dirs), each as g++ builds it: host functions blanked, the definitions of
    kernels not in `entries` (None: keep all) left out, every #include kept where
    ``__has_include`` finds it, and the `#include` lines of the `missing` headers left out;
    lines kept."""

    def edit(text: str) -> str:
        if entries is not None:
            text = isolate.keep_kernels(text, entries)
        text = isolate.without_includes(text, missing)
        # nvcc takes `__shared__ alignas(16) float As[...]`; with __shared__ spelled `static`, g++
        # wants the standard attribute first: swap the two words (same line, same length).
        return _SHARED_ALIGNAS.sub(lambda m: f"{m['alignas']}{m['space']}__shared__", text)

    return device_includes.DeviceFiles(edit(cuda_source.device_part(cuda_source.read_source(source), compiler="nvrtc")),
                                       cuda_source.include_dirs_of(source), cache_dir() / "headers",
                                       compiler="host", edit=edit)


def device_copy(source: Path, tmp: Path, files: device_includes.DeviceFiles) -> Path:
    """The translation unit's view of the source, in `tmp`: its device part (`files`), its own
    headers read through their device copies. A `#line` directive keeps g++'s errors and the
    barrier sites pointing at the user's file."""
    copy = tmp / f"device-{source.name}"
    copy.write_bytes(cuda_source.source_bytes(f'#line 1 "{source}"\n' + files.program(())))   # any encoding
    return copy


def _include_flags(source: Path) -> list[str]:
    """-I for the simulator's CUDA headers, then the source's directory and the catalog's
    include_dirs, in the order NVRTC searches them."""
    return [f"-I{INCLUDE}", *(f"-I{d}" for d in cuda_source.include_dirs_of(source))]


def _source_key(source: Path, files: device_includes.DeviceFiles) -> list[str]:
    """What a build reads of the user's files: the source, the device texts of its own headers
    (every depth), the directories searched."""
    return [str(source), cuda_source.read_source(source), json.dumps(files.fingerprint()),
            json.dumps([str(d) for d in cuda_source.include_dirs_of(source)])]



def argument_layout(instance) -> tuple[tuple[int, int, object], ...]:
    """(position, offset, C type) of each by-value argument of `instance` in the request's
    argument bytes: each in the type its kernel declares (gemmcheck.contract.launch.packed_types),
    at an offset aligned to its size."""
    layout, offset = [], 0
    for position, (role, ctype) in enumerate(zip(instance.spec.roles, launch.packed_types(instance))):
        if ctype.kind == launch.POINTER:
            continue
        align = min(ctype.size, 8)
        offset = -(-offset // align) * align
        layout.append((position, offset, ctype))
        offset += ctype.size
    return tuple(layout)


def argument_bytes(instance, args) -> bytes:
    """The request's argument bytes for a Launch's arguments, laid out by argument_layout."""
    layout = argument_layout(instance)
    out = bytearray(layout[-1][1] + layout[-1][2].size if layout else 0)
    for position, offset, ctype in layout:
        packed = np.asarray(args[position]).tobytes()
        if len(packed) != ctype.size:
            raise ValueError(f"{instance.id}: argument {position + 1} is {len(packed)} bytes; the kernel declares "
                             f"{ctype} ({ctype.size} bytes)")
        out[offset:offset + ctype.size] = packed
    return bytes(out)


_LAUNCHER_HELPERS = """\
// The type of each parameter of a kernel, as g++ declares it (cv-qualifiers dropped).
template <typename F> struct cudasim_parameters;
template <typename... P> struct cudasim_parameters<void (*)(P...)>
{
    template <int I> using at = typename std::remove_cv<typename std::tuple_element<I, std::tuple<P...>>::type>::type;
};
template <typename... P> struct cudasim_parameters<void (*)(P...) noexcept> : cudasim_parameters<void (*)(P...)> {};
// One argument, its bytes copied into the declared type (never converted).
template <typename P> P cudasim_argument(const unsigned char *n) { P v; std::memcpy((void *)&v, n, sizeof v); return v; }"""


def launcher_source(source: Path, instances) -> str:
    """The translation unit for one source: prelude, the .cu, one launcher per instantiation.

    Each launcher passes the kernel's parameters in the order of its catalog roles: each
    pointer from its slot (locating.buffer_names: A, B, C, then D and the scale factors), cast
    to the pointer type the kernel declares; every other argument copied from the request's
    argument bytes into the type the kernel declares, after g++ confirms it has the size
    gemmcheck packed.
    """
    lines = ["// generated by gemmcheck cpu-sim; do not edit", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>",
             "#include <cuda_fp8.h>", "#include <cstring>", "#include <tuple>", "#include <type_traits>",
             f'#include "{source}"', "namespace {", _LAUNCHER_HELPERS]
    table = []
    for index, inst in enumerate(instances):
        slots = buffer_names(inst)
        by_position = {position: (offset, ctype) for position, offset, ctype in argument_layout(inst)}
        args, checks = [], []
        declared = launch.declared_by_role(inst)
        position = 0   # the role's index: its slot in the request's argument bytes
        for parameter, (roles, ptype) in enumerate(launch.packed_by_parameter(inst)):
            holder = declared[position].member_of if declared[position] is not None else None
            if holder is not None:
                checks.append(f"static_assert(sizeof(P::at<{parameter}>) == {ptype.size}, \"{inst.name_expression}: "
                              f"gemmcheck lays out parameter {parameter + 1} ({ptype}) in {ptype.size} bytes, but g++ "
                              "gives it another size\");")
                checks.append(f"P::at<{parameter}> s{parameter}{{}};")
            for role in roles:
                member = declared[position].name if holder is not None else None
                target = f"P::at<{parameter}>" if member is None else f"decltype(s{parameter}.{member})"
                what = f"parameter {parameter + 1} ({role})" if member is None else f"member {member} ({role})"
                if role in slots:
                    value = f"({target})p[{slots.index(role)}]"
                else:
                    offset, ctype = by_position[position]
                    value = f"cudasim_argument<{target}>(n + {offset})"
                    checks.append(f"static_assert(sizeof({target}) == {ctype.size}, \"{inst.name_expression}: "
                                  f"gemmcheck packs {what} as {ctype}, {ctype.size} bytes, but g++ declares it "
                                  "another size\");")
                if member is None:
                    args.append(value)
                else:
                    at = declared[position].offset
                    checks.append(f"static_assert(__builtin_offsetof(P::at<{parameter}>, {member}) == {at}, "
                                  f"\"{inst.name_expression}: gemmcheck puts {what} at byte {at} of {ptype}, but g++ "
                                  "puts it elsewhere\");")
                    checks.append(f"s{parameter}.{member} = {value};")
                position += 1
            if holder is not None:
                args.append(f"s{parameter}")
        lines.append(f"void cudasim_launch_{index}(void *const *p, const unsigned char *n) {{\n"
                     f"    (void)n;\n    using P = cudasim_parameters<decltype(&{inst.name_expression})>;\n"
                     + "".join(f"    {c}\n" for c in checks)
                     + f"    {inst.name_expression}({', '.join(args)});\n}}")
        table.append(f'    {{"{inst.name_expression}", cudasim_launch_{index}}},')
    lines += ["}  // namespace", 'extern "C" const cudasim_kernel cudasim_kernels[] = {', *table, "};",
              f'extern "C" const int cudasim_kernel_count = {len(instances)};', ""]
    return "\n".join(lines)


def _compile_device(cmd: list[str], what: str, rewrite) -> None:
    """Run the compile `cmd`; when it stops on headers that are not there (a host library's,
    such as cuBLAS's, which nvcc's device pass finds but device code never uses), leave
    their #include lines out with rewrite(missing) and compile again."""
    try:
        _run(cmd, what)
    except BuildError as exc:
        if "No such file or directory" not in exc.log:
            raise
        missing = isolate.missing_headers(cmd)
        if not missing:
            raise
        rewrite(missing)
        _run(cmd, what)


def _defines(defines) -> list[str]:
    return [f"-D{name}={value}" for name, value in defines]


def _run(cmd: list[str], what: str) -> None:
    try:
        # LC_ALL=C: g++'s messages with ASCII quotes, as isolate.unmodelled reads them; errors=
        # "replace": g++ quotes the source's lines, whatever their encoding
        out = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=COMPILE_TIMEOUT_S,
                             env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise BuildTimeout(f"{what}: g++ ran longer than {COMPILE_TIMEOUT_S} s") from None
    if out.returncode != 0:
        log = (out.stderr or out.stdout).strip().splitlines()
        errors = [line for line in log if "error" in line] or log
        raise BuildError(f"{what}: g++ failed (exit {out.returncode}):\n" + "\n".join(errors[:25]),
                         out.stderr or out.stdout)


def _cached(key: str, name: str, build) -> Path:
    """The cached file `name` for `key`, building it with build(tmpdir) -> path on a miss."""
    target = cache_dir() / key / name
    if target.exists():
        return target
    with buildlock.exclusive(target):   # one process builds it; the others wait, then use it
        if not target.exists():
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                built = build(Path(tmp))
                os.replace(built, target)  # atomic: readers see the whole file or none
    return target


def worker() -> Path:
    """The worker executable (runtime.cpp), built once per machine and simulator version."""
    cxx, version = compiler()
    key = _key("worker", version, " ".join(WORKER_FLAGS), _simulator_sources())

    def build(tmp: Path) -> Path:
        out = tmp / "cudasim-worker"
        _run([cxx, *COMMON_FLAGS, *WORKER_FLAGS, f"-I{INCLUDE}", str(RUNTIME), "-o", str(out), "-ldl"],
             "building the cpu-sim worker")
        return out

    return _cached(key, "cudasim-worker", build)


@dataclass(frozen=True)
class SharedArray:
    name: str       # demangled: matmul_tiled<float, 32>(float const*, ...)::As
    start: int      # module-relative address
    size: int


@dataclass(frozen=True)
class Module:
    path: Path
    names: tuple[str, ...]                 # name expressions, in table order
    shared: tuple[SharedArray, ...]
    source: Path
    build_seconds: float | None            # None: from the cache

    def index(self, name_expression: str) -> int:
        return self.names.index(name_expression)

    def array_at(self, address: int) -> tuple[str, int]:
        for arr in self.shared:
            if arr.start <= address < arr.start + arr.size:
                return arr.name, address - arr.start
        return "?", address


# A function-local static: `...(args)::name`, what `__shared__` arrays become.
_LOCAL_STATIC = re.compile(r"\)(?: const)?::[A-Za-z_]\w*$")


def shared_arrays(so: Path) -> tuple[SharedArray, ...]:
    out = subprocess.run(["nm", "-C", "-S", "--defined-only", str(so)], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"nm {so}: {out.stderr.strip()}")
    arrays = []
    for line in out.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[2] not in "bBdDuV" or parts[3].startswith("guard variable"):
            continue
        if _LOCAL_STATIC.search(parts[3]):
            arrays.append(SharedArray(parts[3], int(parts[0], 16), int(parts[1], 16)))
    return tuple(sorted(arrays, key=lambda a: a.start))


@timed("compile")
def module(source: Path, instances, defines=()) -> Module:
    """Build (or take from the cache) the module holding every instantiation in `instances`."""
    import time

    unit = _Unit(source, instances, defines, "module", MODULE_FLAGS)
    built: list[float] = []

    def build(tmp: Path) -> Path:
        obj, so = tmp / "launchers.o", tmp / "module.so"
        t0 = time.perf_counter()
        what = f"{source.name}: compiling {', '.join(unit.names)} for cpu-sim"
        unit.compile(tmp, ["-c", "{gen}", "-o", str(obj)], what)
        _run([unit.cxx, "-shared", str(obj), "-o", str(so)], what + " (link)")
        built.append(time.perf_counter() - t0)
        return so

    path = _cached(unit.key, "module.so", build)
    return Module(path, unit.names, shared_arrays(path), source, built[0] if built else None)


@timed("compile")
def asan_runner(source: Path, instances, defines=()) -> tuple[Path, tuple[str, ...]]:
    """An AddressSanitizer executable running one launch of any of `instances`."""
    unit = _Unit(source, instances, defines, "asan", ASAN_FLAGS)

    def build(tmp: Path) -> Path:
        out = tmp / "asan-runner"
        unit.compile(tmp, [str(RUNTIME), "{gen}", "-o", str(out)], f"{source.name}: AddressSanitizer build for cpu-sim")
        return out

    return _cached(unit.key, "asan-runner", build), unit.names


class _Unit:
    """One g++ build of a source's instantiations (the module, or the AddressSanitizer runner):
    its cache key and its compile of the generated translation unit."""

    def __init__(self, source: Path, instances, defines, kind: str, flags):
        self.cxx, version = compiler()
        # The macros of a device compile first (`#if __CUDA_ARCH__ >= 610` takes the branch the
        # GPU runs), the catalog's defines after them (the later -D wins).
        self.defines = (*cuda_source.DEVICE_MACROS.items(), *defines)
        self.source, self.flags = source, flags
        self.instances = sorted(instances, key=lambda i: i.name_expression)
        self.names = tuple(i.name_expression for i in self.instances)
        self.entries = {i.spec.entry for i in self.instances}
        self.files = device_files(source, self.entries)
        self.key = _key(kind, version, " ".join(flags), _simulator_sources(),
                        launcher_source(Path("device.cu"), self.instances), *_source_key(source, self.files),
                        repr(self.defines))

    def compile(self, tmp: Path, args: list[str], what: str) -> None:
        """Write the translation unit in `tmp` and run g++ with `args` ("{gen}" stands for the
        unit's path); headers g++ cannot find are left out and the unit written again."""
        gen = tmp / "launchers.cpp"

        def write(files) -> None:
            gen.write_text(launcher_source(device_copy(self.source, tmp, files), self.instances))

        write(self.files)
        cmd = [self.cxx, *COMMON_FLAGS, *self.flags, *_defines(self.defines), *_include_flags(self.source),
               *(str(gen) if a == "{gen}" else a for a in args)]
        _compile_device(cmd, what, lambda missing: write(device_files(self.source, self.entries, missing)))


def static_shared_bytes(module: Module, name_expression: str) -> int:
    """Bytes of the `__shared__` arrays one instantiation uses, wherever they are declared.

    Arrays often live in a device function the kernel calls (``tiled_guarded_body<...>::As``),
    so they are found by following the module's code from the instantiation's launcher:
    every function it reaches, every shared array those functions address.
    """
    return _shared_bytes_by_launcher(module.path, module.shared).get(module.index(name_expression), 0)


_FUNCTION = re.compile(r"^[0-9a-f]+ <(?P<name>.*)>:$")
_ADDRESS = re.compile(r"#\s*(?P<address>[0-9a-f]+) <")
_BRANCH = re.compile(r"\s(?:call|jmp)\s+[0-9a-f]+ <(?P<name>.*)>\s*$")
_RELOCATION = re.compile(r"^(?P<address>[0-9a-f]+)\s+R_X86_64_\w+\s+(?P<name>.*?)(?:@@?\w+)?(?:\+0x[0-9a-f]+)?\s*$")
_LAUNCHER = "(anonymous namespace)::cudasim_launch_{}(void* const*, unsigned char const*)"


def _objdump(*args: str) -> str:
    out = subprocess.run(["objdump", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"objdump {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


@functools.lru_cache(maxsize=None)
def _shared_bytes_by_launcher(so: Path, arrays: tuple[SharedArray, ...]) -> dict[int, int]:
    """{launcher index: bytes of the shared arrays reachable from it}."""
    # Shared arrays are unique globals reached through the GOT: map slots to their symbols.
    slots = {int(m["address"], 16): m["name"] for line in _objdump("-R", "-C", str(so)).splitlines()
             if (m := _RELOCATION.match(line))}
    by_name = {a.name: a for a in arrays}
    calls: dict[str, set[str]] = {}
    uses: dict[str, set[str]] = {}
    current = None
    for line in _objdump("-d", "-C", "--no-show-raw-insn", str(so)).splitlines():
        if (m := _FUNCTION.match(line)):
            current = re.sub(r" \[clone [^\]]*\]$", "", m["name"])
            calls.setdefault(current, set())
            uses.setdefault(current, set())
        elif current is not None:
            if (m := _BRANCH.search(line)):
                calls[current].add(re.sub(r"(@plt)?(\+0x[0-9a-f]+)?$", "", m["name"]))
            if (m := _ADDRESS.search(line)):
                address = int(m["address"], 16)
                array = by_name.get(slots.get(address, "")) or next(
                    (a for a in arrays if a.start <= address < a.start + a.size), None)
                if array is not None:
                    uses[current].add(array.name)
    out, index = {}, 0
    while _LAUNCHER.format(index) in calls:
        seen, todo = set(), [_LAUNCHER.format(index)]
        while todo:
            fn = todo.pop()
            if fn not in seen:
                seen.add(fn)
                todo += [c for c in calls.get(fn, ()) if c in calls]
        out[index] = sum(by_name[n].size for fn in seen for n in uses[fn])
        index += 1
    return out
