"""The kernel catalog: KernelSpec, and loading + validating catalog files.

A catalog is a TOML file with one ``[[kernel]]`` table per kernel. Tests never
name a kernel; they ask the catalog. Every error is one line naming the file,
the kernel and what to do.
"""

from __future__ import annotations

import itertools
import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck.verdict import defects
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import cuda_source, launch

BUILTIN = Path(__file__).resolve().parents[2] / "kernels" / "catalog.toml"
LADDER = BUILTIN.with_name("ladder_catalog.toml")
# Catalogs named on the command line (--gemm-catalog NAME); anything else is a path. The ladder is
# not in the default run: its dozens of register-blocked configs take the CPU simulator many minutes.
NAMED = {"builtin": (BUILTIN,), "ladder": (LADDER,), "all": (BUILTIN, LADDER)}

SIGNATURES = {
    "square": "(A, B, C, N): square N x N operands",
    "mnk": "(A, B, C, M, N, K): C[M x N] = A[M x K] B[K x N]",
}
SHAPES = {
    "square-tile-multiple": "M = N = K, a multiple of TILE",
    "tile-multiple": "M, N and K each a multiple of TILE",
    "any": "any M, N, K >= 0 (BLAS: M or N = 0 is an empty result, K = 0 gives beta C)",
}
# What a kernel is declared to be: correct, or caught with one defect class.
EXPECTATIONS = defects.expectations()
MAX_THREADS_PER_BLOCK = launch.MAX_THREADS_PER_BLOCK
MAX_STATIC_SHARED_BYTES = launch.MAX_STATIC_SHARED_BYTES
TEMPLATE_FIELDS = {"T", "TILE"}
# The argument lists the named signatures stand for.
SIGNATURE_ROLES = {"square": ("A", "B", "C", "N"), "mnk": ("A", "B", "C", "M", "N", "K")}
LAYOUTS = ("row", "col")
DEFAULT_TILE = "TILE"
# The edge the shape generators use for a kernel with no tile parameter (a naive kernel
# launched by grid and block expressions): shapes around multiples of 32, a warp's width.
# Only the generated shapes see it; such a kernel's ids and launches have no tile.
DEFAULT_SHAPE_EDGE = 32
# The named shape claims that speak of the tile.
TILE_SHAPES = ("square-tile-multiple", "tile-multiple")

_FIELDS = {
    "name", "description", "source", "entry", "template_args", "signature", "args", "layout", "policy",
    "grid", "block", "shared_bytes", "tiles", "tile", "params", "configs", "macros", "dtypes", "shapes",
    "shared_tiles", "shared_pad", "expect", "gpu_only", "sim_configs", "include_dirs", "defines",
    *("reads_c_at_beta_zero", "deterministic"),   # declared conventions (CONVENTIONS)
}
# Conventions a kernel may declare, each a boolean field with its default (BLAS's rule) and
# what the suite does when the kernel declares the other value (docs/blas-contract.md).
CONVENTIONS = {
    "reads_c_at_beta_zero": (False, "C is always initialized by the kernel's callers: at beta = 0 the "
                                    "suite fills C with finite values instead of NaN"),
    "deterministic": (True, "the kernel reduces with floating-point atomics: same bits on every "
                            "launch is not claimed for random inputs"),
}
_REQUIRED = ("name", "source", "entry", "dtypes", "expect")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class CatalogError(ValueError):
    """A catalog file is malformed; the message names the file, the kernel and the fix."""


@dataclass(frozen=True, eq=False)
class KernelSpec:
    """One catalog entry: a kernel (template or not) and everything needed to run and judge it.

    Compile-time parameters: ``params`` maps each name to its values (``tiles`` is the
    value list of the tile parameter); ``configs`` adds named full assignments. Every
    combination of the value lists, then every config, is one instantiation per dtype.
    """

    name: str
    source: Path
    entry: str
    signature: str = "custom"             # "square" | "mnk" | "custom" (roles listed in `args`)
    policy: str | None = "tile2d"         # a named geometry, or None when grid/block are given
    tiles: tuple[int, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    expect: str = "correct"
    template_args: str = "{T}, {TILE}"    # "" : the kernel is not a template
    shapes: str = "any"                   # a named claim or a constraint over M, N, K, parameters
    shared_tiles: int | None = None       # TILE x (TILE + shared_pad) arrays of T in shared memory
    shared_pad: int = 0
    description: str = ""
    gpu_only: bool = False                # needs what the CPU simulator does not model
    catalog: Path = field(default=BUILTIN, compare=False)
    roles: tuple = ()                     # the kernel's parameters in order: role names or int literals
    layouts: dict = field(default_factory=dict)          # "A"/"B"/"C" -> "row" | "col"
    params: dict = field(default_factory=dict)           # name -> tuple of values
    configs: tuple = ()                   # ((name or None, {param: value}), ...)
    macros: tuple[str, ...] = ()          # parameters passed as -D NAME=value
    tile_param: str = DEFAULT_TILE        # the parameter that is the tile edge
    geometry: launch.Geometry | None = None
    sim_configs: tuple[str, ...] | None = None   # the configs the CPU simulator runs (None: all)
    include_dirs: tuple[Path, ...] = ()   # searched after the source's directory, by every compile
    defines: tuple = ()                   # ((NAME, value), ...): -D NAME=value in every compile
    reads_c_at_beta_zero: bool = False    # convention: callers always initialize C (CONVENTIONS)
    deterministic: bool = True            # convention: False for floating-point atomic reductions

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)
        if not self.roles:
            set_("roles", SIGNATURE_ROLES.get(self.signature, SIGNATURE_ROLES["mnk"]))
        set_("layouts", {name: self.layouts.get(name, "row") for name in launch.POINTER_ROLES})
        params = {k: tuple(v) for k, v in self.params.items()}
        if self.tiles and not self.configs:
            params[self.tile_param] = tuple(self.tiles)   # `tiles` wins, so dataclasses.replace(tiles=) works
        set_("params", params)
        if not self.tiles:
            set_("tiles", tuple(dict.fromkeys(a[self.tile_param] for _, a in self.assignments()
                                              if self.tile_param in a)))
        if self.policy is not None or self.geometry is None:   # a named policy wins, as tiles do
            set_("geometry", launch.POLICIES[self.policy or "tile2d"].geometry(self.tile_param))
        set_("_scope", None if self.shapes in SHAPES else launch.Expression(self.shapes))
        if self.geometry.shared_bytes.text.strip() != "0":
            set_("gpu_only", True)   # cpu-sim does not model dynamic (extern) shared memory

    def __hash__(self):
        return hash((self.name, str(self.source), str(self.catalog)))

    def __eq__(self, other):
        return isinstance(other, KernelSpec) and self.__dict__ == other.__dict__

    @property
    def is_reference(self) -> bool:
        return self.expect == "correct"

    def declared_conventions(self) -> tuple[str, ...]:
        """The conventions this kernel declares away from BLAS's defaults, as written in
        the catalog: ``("reads_c_at_beta_zero = true",)``."""
        return tuple(f"{k} = {str(getattr(self, k)).lower()}" for k, (default, _) in CONVENTIONS.items()
                     if getattr(self, k) != default)

    def simulated(self, config: str | None) -> bool:
        """Whether the CPU simulator runs this config (``sim_configs`` picks a few of many)."""
        return not self.gpu_only and (self.sim_configs is None or config in self.sim_configs)

    def assignments(self) -> list[tuple[str | None, dict[str, int]]]:
        """(config name or None, parameter values) of every instantiation, in catalog order."""
        names = list(self.params)
        product = [(None, dict(zip(names, values)))
                   for values in itertools.product(*(self.params[n] for n in names))] if names else []
        if not product and not self.configs:
            return [(None, {})]   # no compile-time parameter: one instantiation
        return product + [(name, dict(values)) for name, values in self.configs]

    @property
    def has_tile(self) -> bool:
        """Whether the tile parameter has a value (else shapes are generated around DEFAULT_SHAPE_EDGE)."""
        return any(self.tile_param in a for _, a in self.assignments())

    def name_expression(self, dtype: str, tile: int | None = None, params: dict | None = None) -> str:
        """The C++ name of one instantiation: ``matmul_tiled<float, 32>``, or ``entry`` if not a template."""
        if not self.template_args.strip():
            return self.entry
        values = dict(params if params is not None else {self.tile_param: tile})
        args = self.template_args.format(T=dt.get(dtype).c_type, **values)
        return f"{self.entry}<{args}>"

    def shared_bytes(self, dtype: str, tile: int) -> int | None:
        """Static shared memory the catalog declares for one instantiation (None: not declared)."""
        if self.shared_tiles is None:
            return None
        return self.shared_tiles * tile * (tile + self.shared_pad) * dt.get(dtype).itemsize

    def supports(self, M: int, N: int, K: int, tile: int | None = None, params: dict | None = None) -> bool:
        """Whether the kernel claims to be correct on this shape at these parameters."""
        params = dict(params if params is not None else {self.tile_param: tile})
        tile = params.get(self.tile_param, tile)
        if "N" in self.roles and not ({"M", "K"} & set(self.roles)) and not (M == N == K):
            return False   # one size argument: square problems only
        if self._scope is not None:
            return self._scope.holds({**params, "M": M, "N": N, "K": K})
        if self.shapes == "square-tile-multiple":
            return M == N == K and M % tile == 0
        if self.shapes == "tile-multiple":
            return M % tile == 0 and N % tile == 0 and K % tile == 0
        return True

    def describe_shapes(self) -> str:
        return SHAPES.get(self.shapes, self.shapes)

    def instances(self) -> list["Instance"]:
        return [Instance(self, d, params=values, config=name)
                for d in self.dtypes for name, values in self.assignments()]


@dataclass(frozen=True, eq=False)
class Instance:
    """One instantiation of a kernel: the spec at one dtype and one assignment of its parameters.

    ``Instance(spec, dtype, tile)`` still works: it picks the spec's instantiation at that tile.
    """

    spec: KernelSpec
    dtype: str
    tile: int | None = None
    params: dict | None = None
    config: str | None = None        # the name of the config it comes from, if any

    def __post_init__(self):
        params = self.params
        if params is None:
            if self.spec.has_tile:
                match = [(n, a) for n, a in self.spec.assignments() if a.get(self.spec.tile_param) == self.tile]
                name, params = match[0] if match else (None, {self.spec.tile_param: self.tile})
            else:
                name, params = self.spec.assignments()[0]
            object.__setattr__(self, "config", name)
        object.__setattr__(self, "params", dict(params))
        tile = params.get(self.spec.tile_param, self.tile)
        object.__setattr__(self, "tile", DEFAULT_SHAPE_EDGE if tile is None else tile)

    def _key(self):
        return (self.spec, self.dtype, tuple(sorted(self.params.items())), self.config)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, Instance) and self._key() == other._key()

    def __repr__(self):
        return f"Instance({self.id})"

    @property
    def id(self) -> str:
        """Readable test id: ``matmul_tiled-float32-TILE32``, ``sgemm-float32-BM128_BN128``, and
        ``naive-float32`` for a kernel with no compile-time parameter."""
        if self.config:
            suffix = self.config
        else:
            suffix = "_".join(f"{k}{v}" for k, v in self.params.items())
        return f"{self.spec.name}-{self.dtype}" + (f"-{suffix}" if suffix else "")

    @property
    def name_expression(self) -> str:
        return self.spec.name_expression(self.dtype, params=self.params)

    @property
    def defines(self) -> tuple[tuple[str, int], ...]:
        """The -D macros this instantiation is compiled with: its macro parameters, then the
        catalog's fixed ``defines``."""
        return tuple((name, self.params[name]) for name in self.spec.macros) + tuple(self.spec.defines)

    @property
    def build_unit(self) -> tuple:
        """What one compile builds: the source and its -D macros. Instantiations of one unit
        share a module; each backend and the compile suite compile a unit once."""
        return (self.spec.source, self.defines)

    @property
    def dt(self) -> dt.DType:
        return dt.get(self.dtype)

    def supports(self, M: int, N: int, K: int) -> bool:
        return self.spec.supports(M, N, K, params=self.params)

    def launch_shape(self, M: int, N: int, K: int):
        """(grid, block) for a problem, from the kernel's geometry."""
        grid, block, _ = self.spec.geometry.evaluate({**self.params, "M": M, "N": N, "K": K})
        return grid, block


def by_build_unit(instances) -> dict[tuple, list[Instance]]:
    """Instantiations grouped by Instance.build_unit, each once, in the order given."""
    units: dict[tuple, list[Instance]] = {}
    for inst in dict.fromkeys(instances):
        units.setdefault(inst.build_unit, []).append(inst)
    return units


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


def resolve(names) -> list[Path]:
    """Catalog paths for --gemm-catalog values: a name from NAMED, or a path; repeats dropped."""
    return list(dict.fromkeys(p for n in names for p in NAMED.get(str(n), (Path(n),))))


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
    for key in ("name", "source", "entry", "signature", "policy", "expect", "template_args", "shapes",
                "description", "tile"):
        if key in entry and not isinstance(entry[key], str):
            fail(f"'{key}' must be a string, got {entry[key]!r}")

    roles, signature = _roles(entry, fail)
    layouts = _layouts(entry, fail)
    expect = entry["expect"]
    if expect not in EXPECTATIONS:
        fail(f"unknown expect {expect!r}; use 'correct' or a defect: {', '.join(EXPECTATIONS[1:])}")
    dtype_names = entry["dtypes"]
    if not isinstance(dtype_names, list) or not dtype_names:
        fail(f"'dtypes' must be a non-empty list, got {dtype_names!r}")
    for name in dtype_names:
        if name not in dt.DTYPES:
            fail(f"unknown dtype {name!r}; known: {', '.join(dt.DTYPES)}")

    source = (path.parent / entry["source"]).resolve()
    if not source.is_file():
        fail(f"source '{entry['source']}' not found (looked for {source})")
    text = source.read_text()
    include_dirs = _include_dirs(entry, path, fail)
    fixed_defines = _fixed_defines(entry, fail)
    try:
        cuda_source.declare_include_dirs(source, include_dirs)
    except cuda_source.IncludeDirConflict as exc:
        fail(str(exc))
    found_in = dict(file_name=str(source), include_dirs=cuda_source.include_dirs_of(source), defines=fixed_defines)
    why = cuda_source.missing_kernel(text, entry["entry"], **found_in)
    if why:
        fail(why)

    tile_param = entry.get("tile", DEFAULT_TILE)
    tile_required = any(k in entry for k in ("policy", "tile", "tiles", "shared_tiles")) or \
        entry.get("shapes") in TILE_SHAPES or not {"M", "K"} & set(roles)
    params, configs = _parameters(entry, tile_param, cuda_source.defines(text), fail, tile_required)
    macros = entry.get("macros", [])
    if not isinstance(macros, list) or any(m not in params and not _in_configs(m, configs) for m in macros):
        fail(f"'macros' must list parameters to pass as -D NAME=value, got {macros!r}; "
             f"parameters: {sorted(params)}")

    templated = cuda_source.is_template(text, entry["entry"], **found_in)
    template_args = entry.get("template_args", "" if templated is False else "{T}, {TILE}")
    if templated is False and template_args.strip():
        fail(f"entry '{entry['entry']}' is not a template in {source.name}, but template_args = "
             f"{template_args!r}; drop template_args (it is then named plainly)")
    if templated is True and not template_args.strip():
        fail(f"entry '{entry['entry']}' is a template in {source.name}; give its arguments in template_args, "
             "e.g. \"{T}, {TILE}\"")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template_args) if f is not None}
    except ValueError as exc:
        fail(f"template_args {template_args!r} is not a valid template: {exc}")
    known_fields = {"T", *params, *(k for _, c in configs for k in c)}
    if fields - known_fields:
        fail(f"template_args {template_args!r} uses {sorted(fields - known_fields)}; only {{T}} and the "
             f"parameters {sorted(known_fields - {'T'})} are substituted (set 'tiles', 'params' or 'configs', "
             "or template_args = \"\" for a kernel that is not a template)")

    geometry, policy = _geometry(entry, tile_param, fail)
    square = not {"M", "K"} & set(roles)     # one size argument: N x N operands
    default_shapes = "square-tile-multiple" if square else "any"
    shapes = entry.get("shapes", default_shapes)
    if shapes not in SHAPES:
        try:
            launch.Expression(shapes)
        except launch.ExpressionError as exc:
            fail(f"shapes: {exc}; or use one of {sorted(SHAPES)}")
    if square and shapes not in ("square-tile-multiple",):
        fail(f"a kernel with one size argument takes only square problems; set shapes = 'square-tile-multiple'")

    shared_tiles = entry.get("shared_tiles")
    shared_pad = entry.get("shared_pad", 0)
    for key, value in (("shared_tiles", shared_tiles), ("shared_pad", shared_pad)):
        if value is not None and (type(value) is not int or value < 0):
            fail(f"'{key}' must be a non-negative integer, got {value!r}")
    gpu_only = entry.get("gpu_only", False)
    if type(gpu_only) is not bool:
        fail(f"'gpu_only' must be true or false, got {gpu_only!r}")
    conventions = {}
    for key, (default, _) in CONVENTIONS.items():
        conventions[key] = entry.get(key, default)
        if type(conventions[key]) is not bool:
            fail(f"'{key}' must be true or false, got {conventions[key]!r}")
    sim_configs = entry.get("sim_configs")
    named = [n for n, _ in configs if n]
    if sim_configs is not None and (not isinstance(sim_configs, list) or not sim_configs
                                    or any(c not in named for c in sim_configs)):
        fail(f"'sim_configs' must list names from 'configs' ({', '.join(named) or 'none'}), got {sim_configs!r}")

    spec = KernelSpec(
        name=entry["name"], source=source, entry=entry["entry"], signature=signature,
        policy=policy, dtypes=tuple(dtype_names), expect=expect,
        template_args=template_args, shapes=shapes, shared_tiles=shared_tiles,
        shared_pad=shared_pad, description=entry.get("description", ""),
        gpu_only=gpu_only, catalog=path, roles=roles, layouts=layouts, params=params,
        configs=tuple(configs), macros=tuple(macros), tile_param=tile_param, geometry=geometry,
        sim_configs=None if sim_configs is None else tuple(sim_configs),
        include_dirs=include_dirs, defines=fixed_defines, **conventions,
    )
    _check_instantiations(spec, fail)
    return spec


def _roles(entry, fail) -> tuple[tuple, str]:
    """The kernel's parameters by role, and its signature name ("custom" for an args list)."""
    if ("args" in entry) == ("signature" in entry):
        fail("give the kernel's parameters either as args = [\"A\", \"B\", \"C\", \"M\", \"N\", \"K\"] "
             f"or as signature = one of {sorted(SIGNATURES)}, not both or neither")
    if "signature" in entry:
        if entry["signature"] not in SIGNATURES:
            fail(f"unknown signature {entry['signature']!r}; use one of {sorted(SIGNATURES)} or list 'args'")
        return SIGNATURE_ROLES[entry["signature"]], entry["signature"]
    args = entry["args"]
    if not isinstance(args, list) or not args:
        fail(f"'args' must be a non-empty list of roles, got {args!r}")
    for arg in args:
        if not (arg in launch.ROLES or type(arg) is int):
            fail(f"args: unknown role {arg!r}; use {', '.join(launch.ROLES)} or an integer literal")
    named = [a for a in args if isinstance(a, str)]
    twice = sorted({a for a in named if named.count(a) > 1})
    if twice:
        fail(f"args: role(s) {twice} listed twice; each role is one kernel parameter")
    missing = [r for r in launch.POINTER_ROLES if r not in named]
    if missing:
        fail(f"args: no {', '.join(missing)}; a GEMM kernel takes the pointers A, B and C")
    return tuple(args), "custom"


def _layouts(entry, fail) -> dict[str, str]:
    layouts = entry.get("layout", {})
    if not isinstance(layouts, dict):
        fail(f"'layout' must be a table such as {{A = \"col\", B = \"col\", C = \"col\"}}, got {layouts!r}")
    for name, value in layouts.items():
        if name not in launch.POINTER_ROLES or value not in LAYOUTS:
            fail(f"layout: {name} = {value!r}; use A, B or C = \"row\" or \"col\"")
    return dict(layouts)


def _include_dirs(entry, path: Path, fail) -> tuple[Path, ...]:
    """``include_dirs``: directories relative to the catalog file, each one that exists."""
    raw = entry.get("include_dirs", [])
    if not isinstance(raw, list) or not all(isinstance(d, str) and d for d in raw):
        fail(f"'include_dirs' must be a list of directories relative to the catalog, such as "
             f"[\"include\", \"../common\"], got {raw!r}")
    dirs = []
    for d in raw:
        full = (path.parent / d).resolve()
        if not full.is_dir():
            fail(f"include_dirs: '{d}' is not a directory (looked for {full})")
        dirs.append(full)
    return tuple(dirs)


def _fixed_defines(entry, fail) -> tuple[tuple[str, object], ...]:
    """``defines``: macros every compile of the kernel gets, as -D NAME=value."""
    raw = entry.get("defines", {})
    if not isinstance(raw, dict):
        fail(f"'defines' must be a table such as {{ USE_FAST_PATH = 1, SCALE = \"2.0f\" }}, got {raw!r}")
    out = []
    for name, value in raw.items():
        if not _IDENTIFIER.fullmatch(name):
            fail(f"defines: {name!r} is not a macro name (letters, digits and _, not first a digit)")
        if type(value) is bool:
            value = int(value)
        if type(value) not in (int, str) or (isinstance(value, str) and "\n" in value):
            fail(f"defines: {name} = {value!r}; give an integer, true/false or a one-line string "
                 "(passed as -D NAME=value)")
        if name in entry.get("params", {}) or name in entry.get("macros", []):
            fail(f"defines: {name} is also a parameter; keep it in one place")
        out.append((name, value))
    return tuple(out)


def _in_configs(name, configs) -> bool:
    return all(name in values for _, values in configs) and bool(configs)


def _parameters(entry, tile_param, source_defines, fail, tile_required=True):
    """({name: values}, [(config name, {name: value})]) with the source's #defines folded in."""
    params: dict[str, tuple[int, ...]] = {}
    raw = entry.get("params", {})
    if not isinstance(raw, dict):
        fail(f"'params' must be a table of value lists such as {{BM = [64, 128]}}, got {raw!r}")
    if "tiles" in entry:
        if tile_param in raw:
            fail(f"both 'tiles' and params.{tile_param} give the tile's values; keep one")
        raw = {tile_param: entry["tiles"], **raw}
    for name, values in raw.items():
        what = "'tiles'" if name == tile_param and "tiles" in entry else f"params.{name}"
        if not _IDENTIFIER.fullmatch(name) or name in launch.ROLES or name == "T":
            fail(f"{what}: {name!r} cannot name a parameter (roles, T and non-identifiers are taken)")
        if type(values) is int:
            values = [values]
        if not isinstance(values, list) or not values or not all(type(v) is int and v >= (name == tile_param) for v in values):
            fail(f"{what} must be a non-empty list of {'positive' if name == tile_param else 'non-negative'} "
                 f"integers, got {values!r}; "
                 "an empty list gives no instantiation")
        if len(set(values)) != len(values):
            fail(f"{what} lists a value twice: {values!r}")
        params[name] = tuple(values)
    configs = []
    raw_configs = entry.get("configs", [])
    if not isinstance(raw_configs, list) or ("configs" in entry and not raw_configs):
        fail(f"'configs' must be a non-empty list of tables such as [{{name = \"128x128\", BM = 128}}], "
             f"got {raw_configs!r}")
    for number, config in enumerate(raw_configs, 1):
        if not isinstance(config, dict):
            fail(f"configs #{number} must be a table, got {config!r}")
        name = config.get("name")
        if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[\w.+-]+", name)):
            fail(f"configs #{number}: name {name!r} must be letters, digits, _ . + - (it is in test ids)")
        values = {k: v for k, v in config.items() if k != "name"}
        if not values or not all(type(v) is int and v >= (k == tile_param) and _IDENTIFIER.fullmatch(k)
                                 for k, v in values.items()):
            fail(f"configs #{number}: {config!r} must give parameters non-negative integers "
                 f"(the tile parameter {tile_param} a positive one)")
        configs.append((name, {**{k: v[0] for k, v in params.items() if len(v) == 1 and k not in values},
                               **values}))
    if configs:
        params = {k: v for k, v in params.items() if len(v) > 1}   # single values were folded into configs
    for name, value in source_defines.items():
        given = set(params.get(name, ())) | {c[name] for _, c in configs if name in c}
        if given and given != {value}:
            fail(f"the source defines {name} {value} but the catalog gives {name} = {sorted(given)}; "
                 f"drop {name} from the catalog or make it [{value}]")
        if name == tile_param and not given:
            if configs:
                for _, c in configs:
                    c[name] = value
            else:
                params[name] = (value,)
    if not tile_required:
        return params, configs   # grid and block are expressions: a kernel may have no tile
    if not params and not configs:
        fail(f"no value for the tile parameter {tile_param}: set 'tiles', 'params' or 'configs' "
             f"(or #define {tile_param} in the source; a kernel with grid and block expressions needs no tile)")
    if any(tile_param not in c for _, c in configs) or (not configs and tile_param not in params):
        fail(f"the tile parameter {tile_param!r} has no value in every instantiation; give it in 'params', "
             f"'tiles' or each config, or name another with tile = \"...\"")
    return params, configs


def _geometry(entry, tile_param, fail) -> tuple[launch.Geometry, str | None]:
    has_policy, has_exprs = "policy" in entry, ("grid" in entry or "block" in entry)
    if has_policy == has_exprs:
        fail("give the launch geometry either as policy = one of "
             f"{sorted(launch.POLICIES)} or as grid = [...] and block = [...], not both or neither")
    if has_policy:
        if entry["policy"] not in launch.POLICIES:
            fail(f"unknown launch policy {entry['policy']!r}; use one of {sorted(launch.POLICIES)} "
                 "or give grid and block expressions")
        if "shared_bytes" in entry:
            fail("shared_bytes goes with grid and block expressions, not with a policy")
        return launch.POLICIES[entry["policy"]].geometry(tile_param), entry["policy"]
    exprs = {}
    for key in ("grid", "block"):
        value = entry.get(key)
        if not isinstance(value, list) or not 1 <= len(value) <= 3 or not all(isinstance(v, (str, int)) for v in value):
            fail(f"'{key}' must be a list of 1 to 3 expressions (x first), got {value!r}")
        exprs[key] = [str(v) for v in value]
    shared = entry.get("shared_bytes", "0")
    if not isinstance(shared, (str, int)):
        fail(f"'shared_bytes' must be an expression in bytes, got {shared!r}")
    try:
        return launch.Geometry.of(exprs["grid"], exprs["block"], str(shared)), None
    except launch.ExpressionError as exc:
        fail(f"launch geometry: {exc}")


def _check_instantiations(spec: KernelSpec, fail) -> None:
    """Every instantiation names only known symbols, and its block and shared memory fit a GPU."""
    for config, values in spec.assignments():
        where = f"{config or ', '.join(f'{k} {v}' for k, v in values.items())}"
        known = {*values, *launch.DIMENSIONS}
        for what, exprs in (("grid", spec.geometry.grid), ("block", spec.geometry.block),
                            ("shared_bytes", (spec.geometry.shared_bytes,)),
                            ("shapes", (spec._scope,) if spec._scope else ())):
            for expr in exprs:
                if expr.unknown(known) and what == "shapes":
                    fail(f"unknown shapes {expr.text!r}: neither one of {sorted(SHAPES)} nor a constraint "
                         f"over M, N, K and the parameters ({', '.join(sorted(values))}): it names "
                         f"{', '.join(expr.unknown(known))}")
                if expr.unknown(known):
                    fail(f"{what}: {expr.text!r} names {', '.join(expr.unknown(known))}, which is not "
                         f"M, N, K or a parameter ({', '.join(sorted(values))}) at {where}")
        try:
            block = spec.geometry.block_dims({**values, "M": 1, "N": 1, "K": 1}) \
                if not spec.geometry.block[0].names & set(launch.DIMENSIONS) else None
            shared = spec.geometry.shared_bytes.integer({**values, "M": 1, "N": 1, "K": 1}) \
                if not spec.geometry.shared_bytes.names & set(launch.DIMENSIONS) else 0
        except launch.ExpressionError as exc:
            fail(f"at {where}: {exc}")
        if block is not None:
            why = launch.check_block(block)
            if why:
                tile = values.get(spec.tile_param)
                if spec.policy is not None and why.startswith("block") and "per block" in why:
                    why = (f"{spec.tile_param} {tile} gives {block[0] * block[1] * block[2]} threads per block "
                           f"(max {MAX_THREADS_PER_BLOCK})")
                fail(f"{why}; drop {where} from the parameters")
        why = launch.check_shared(shared)
        if why:
            fail(f"{why} at {where}; lower it or drop that instantiation")
        tile = values.get(spec.tile_param)
        for name in spec.dtypes:
            smem = spec.shared_bytes(name, tile)
            if smem is not None and smem > MAX_STATIC_SHARED_BYTES:
                fail(f"{spec.tile_param} {tile} {name} needs {smem} bytes of static shared memory "
                     f"(max {MAX_STATIC_SHARED_BYTES}); drop {spec.tile_param} {tile} or that dtype")
