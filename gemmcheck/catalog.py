"""The kernel catalog: KernelSpec, and loading + validating catalog files.

A catalog is a TOML file with one ``[[kernel]]`` table per kernel. Tests never
name a kernel; they ask the catalog. Every error is one line naming the file,
the kernel and what to do.
"""

from __future__ import annotations

import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck import defects
from gemmcheck import dtypes as dt
from gemmcheck import launch

BUILTIN = Path(__file__).resolve().parent.parent / "kernels" / "catalog.toml"

SIGNATURES = {
    "square": "(A, B, C, N): square N x N operands",
    "mnk": "(A, B, C, M, N, K): C[M x N] = A[M x K] B[K x N]",
}
SHAPES = {
    "square-tile-multiple": "M = N = K, a multiple of TILE",
    "tile-multiple": "M, N and K each a multiple of TILE",
    "any": "any M, N, K >= 1",
}
# What a kernel is declared to be: correct, or caught with one defect class.
EXPECTATIONS = defects.expectations()
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024
TEMPLATE_FIELDS = {"T", "TILE"}

_FIELDS = {
    "name", "description", "source", "entry", "template_args", "signature", "policy",
    "tiles", "dtypes", "shapes", "shared_tiles", "shared_pad", "expect", "gpu_only",
}
_REQUIRED = ("name", "source", "entry", "signature", "policy", "tiles", "dtypes", "expect")


class CatalogError(ValueError):
    """A catalog file is malformed; the message names the file, the kernel and the fix."""


@dataclass(frozen=True)
class KernelSpec:
    """One catalog entry: a kernel template and everything needed to run and judge it."""

    name: str
    source: Path
    entry: str
    signature: str
    policy: str
    tiles: tuple[int, ...]
    dtypes: tuple[str, ...]
    expect: str
    template_args: str = "{T}, {TILE}"
    shapes: str = "any"
    shared_tiles: int | None = None   # TILE x (TILE + shared_pad) arrays of T in shared memory
    shared_pad: int = 0
    description: str = ""
    gpu_only: bool = False            # needs what the CPU simulator does not model
    catalog: Path = field(default=BUILTIN, compare=False)

    @property
    def is_reference(self) -> bool:
        return self.expect == "correct"

    def name_expression(self, dtype: str, tile: int) -> str:
        """The C++ name of one instantiation: ``matmul_tiled<float, 32>``."""
        args = self.template_args.format(T=dt.get(dtype).c_type, TILE=tile)
        return f"{self.entry}<{args}>"

    def shared_bytes(self, dtype: str, tile: int) -> int | None:
        """Static shared memory the catalog declares for one instantiation (None: not declared)."""
        if self.shared_tiles is None:
            return None
        return self.shared_tiles * tile * (tile + self.shared_pad) * dt.get(dtype).itemsize

    def supports(self, M: int, N: int, K: int, tile: int) -> bool:
        """Whether the kernel claims to be correct on this shape at this TILE."""
        if self.signature == "square" and not (M == N == K):
            return False
        if self.shapes == "square-tile-multiple":
            return M == N == K and M % tile == 0
        if self.shapes == "tile-multiple":
            return M % tile == 0 and N % tile == 0 and K % tile == 0
        return True

    def instances(self) -> list["Instance"]:
        return [Instance(self, d, t) for d in self.dtypes for t in self.tiles]


@dataclass(frozen=True)
class Instance:
    """One instantiation of a kernel: the spec at one dtype and one TILE."""

    spec: KernelSpec
    dtype: str
    tile: int

    @property
    def id(self) -> str:
        """Readable test id: ``matmul_tiled-float32-TILE32``."""
        return f"{self.spec.name}-{self.dtype}-TILE{self.tile}"

    @property
    def name_expression(self) -> str:
        return self.spec.name_expression(self.dtype, self.tile)

    @property
    def dt(self) -> dt.DType:
        return dt.get(self.dtype)

    def supports(self, M: int, N: int, K: int) -> bool:
        return self.spec.supports(M, N, K, self.tile)

    def launch_shape(self, M: int, N: int, K: int):
        """(grid, block) for a problem, from the kernel's named launch policy."""
        return launch.POLICIES[self.spec.policy].shape(M, N, K, self.tile)


def read_toml(path: Path, error: type[Exception], what: str) -> dict:
    """The TOML file at `path` as a dict; `error` names the file and the cause in one line."""
    if not path.is_file():
        raise error(f"{path}: {what} file not found")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None


def load(path: str | Path) -> list[KernelSpec]:
    """Load and validate one catalog file; raise CatalogError with a one-line cause."""
    path = Path(path).resolve()
    data = read_toml(path, CatalogError, "catalog")
    unknown_top = set(data) - {"kernel"}
    if unknown_top:
        raise CatalogError(f"{path}: unknown top-level keys {sorted(unknown_top)}; "
                           "a catalog holds only [[kernel]] tables")
    entries = data.get("kernel", [])
    if not isinstance(entries, list) or not entries:
        raise CatalogError(f"{path}: no [[kernel]] tables; add at least one")
    specs: list[KernelSpec] = []
    for index, entry in enumerate(entries):
        specs.append(_spec(path, index, entry))
    check_unique(specs)
    return specs


def load_all(paths) -> list[KernelSpec]:
    """Load several catalogs into one list; names must be unique across all of them."""
    specs = [spec for p in paths for spec in load(p)]
    check_unique(specs)
    return specs


def check_unique(specs) -> None:
    seen: dict[str, Path] = {}
    for spec in specs:
        if spec.name in seen:
            raise CatalogError(f"{spec.catalog}: kernel '{spec.name}': duplicate name "
                               f"(also in {seen[spec.name]}); kernel names must be unique")
        seen[spec.name] = spec.catalog


def _spec(path: Path, index: int, entry: dict) -> KernelSpec:
    label = f"kernel '{entry['name']}'" if isinstance(entry.get("name"), str) else f"kernel #{index + 1}"

    def fail(message: str):
        raise CatalogError(f"{path}: {label}: {message}")

    unknown = set(entry) - _FIELDS
    if unknown:
        fail(f"unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    for key in _REQUIRED:
        if key not in entry:
            fail(f"missing required field '{key}'")
    for key in ("name", "source", "entry", "signature", "policy", "expect",
                "template_args", "shapes", "description"):
        if key in entry and not isinstance(entry[key], str):
            fail(f"'{key}' must be a string, got {entry[key]!r}")

    signature = entry["signature"]
    if signature not in SIGNATURES:
        fail(f"unknown signature {signature!r}; use one of {sorted(SIGNATURES)}")
    policy = entry["policy"]
    if policy not in launch.POLICIES:
        fail(f"unknown launch policy {policy!r}; use one of {sorted(launch.POLICIES)}")
    shapes = entry.get("shapes", "square-tile-multiple" if signature == "square" else "any")
    if shapes not in SHAPES:
        fail(f"unknown shapes {shapes!r}; use one of {sorted(SHAPES)}")
    if signature == "square" and shapes not in ("square-tile-multiple",):
        fail(f"signature 'square' takes only square problems; set shapes = 'square-tile-multiple'")
    expect = entry["expect"]
    if expect not in EXPECTATIONS:
        fail(f"unknown expect {expect!r}; use 'correct' or a defect: {', '.join(EXPECTATIONS[1:])}")

    tiles = entry["tiles"]
    if not isinstance(tiles, list) or not tiles or not all(type(t) is int and t >= 1 for t in tiles):
        fail(f"'tiles' must be a non-empty list of positive integers, got {tiles!r}")
    if len(set(tiles)) != len(tiles):
        fail(f"'tiles' lists a TILE twice: {tiles!r}")
    dtype_names = entry["dtypes"]
    if not isinstance(dtype_names, list) or not dtype_names:
        fail(f"'dtypes' must be a non-empty list, got {dtype_names!r}")
    for name in dtype_names:
        if name not in dt.DTYPES:
            fail(f"unknown dtype {name!r}; known: {', '.join(dt.DTYPES)}")

    template_args = entry.get("template_args", "{T}, {TILE}")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template_args) if f is not None}
    except ValueError as exc:
        fail(f"template_args {template_args!r} is not a valid template: {exc}")
    if fields - TEMPLATE_FIELDS:
        fail(f"template_args {template_args!r} uses {sorted(fields - TEMPLATE_FIELDS)}; "
             "only {T} and {TILE} are substituted")

    shared_tiles = entry.get("shared_tiles")
    shared_pad = entry.get("shared_pad", 0)
    for key, value in (("shared_tiles", shared_tiles), ("shared_pad", shared_pad)):
        if value is not None and (type(value) is not int or value < 0):
            fail(f"'{key}' must be a non-negative integer, got {value!r}")
    gpu_only = entry.get("gpu_only", False)
    if type(gpu_only) is not bool:
        fail(f"'gpu_only' must be true or false, got {gpu_only!r}")

    source = (path.parent / entry["source"]).resolve()
    if not source.is_file():
        fail(f"source '{entry['source']}' not found (looked for {source})")
    text = source.read_text()
    if entry["entry"] not in text:
        fail(f"entry '{entry['entry']}' does not appear in {source.name}")

    spec = KernelSpec(
        name=entry["name"], source=source, entry=entry["entry"], signature=signature,
        policy=policy, tiles=tuple(tiles), dtypes=tuple(dtype_names), expect=expect,
        template_args=template_args, shapes=shapes, shared_tiles=shared_tiles,
        shared_pad=shared_pad, description=entry.get("description", ""),
        gpu_only=gpu_only, catalog=path,
    )
    for tile in spec.tiles:
        threads = launch.POLICIES[policy].threads_per_block(tile)
        if threads > MAX_THREADS_PER_BLOCK:
            fail(f"TILE {tile} gives {threads} threads per block (max {MAX_THREADS_PER_BLOCK}); "
                 f"drop it from 'tiles'")
        for name in spec.dtypes:
            smem = spec.shared_bytes(name, tile)
            if smem is not None and smem > MAX_STATIC_SHARED_BYTES:
                fail(f"TILE {tile} {name} needs {smem} bytes of static shared memory "
                     f"(max {MAX_STATIC_SHARED_BYTES}); drop TILE {tile} or that dtype")
    return spec
