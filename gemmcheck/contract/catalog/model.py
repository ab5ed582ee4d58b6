"""The catalog's model of a kernel: KernelSpec (one catalog entry) and Instance (one
instantiation of it: a dtype and one assignment of its parameters)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import launch, operand_types, parameters
from gemmcheck.contract.catalog.vocabulary import (BUILTIN, CONVENTIONS, DEFAULT_SHAPE_EDGE, DEFAULT_TILE,
                                                   SHAPES, SIGNATURE_ROLES)


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
    adds_into_c: bool = False             # convention: the kernel adds into C, which callers zero
    deterministic: bool = True            # convention: False for floating-point atomic reductions
    saturates_output: bool = False        # convention: the output conversion saturates (satfinite)
    d_aliases_c: bool = False             # convention: D may be C's buffer (an in-place update)
    accumulator: str | dict | None = None   # the accumulator's type for every dtype, or by dtype (None: each one's own)
    scalar: str | None = None             # the type of alpha and beta (None: the accumulator's)
    scales: tuple = ()                    # operand_types.Scale of A and/or B
    epilogue: object = None               # gemmcheck.contract.epilogue.Epilogue (None: none)
    sums: str | None = None               # what adds the products (operand_types.SUMS); None: the accumulator
    sums_chain: launch.Expression | None = None   # tensor-core sums: products per partial sum (0: the whole K)
    tensor_maps: dict = field(default_factory=dict)      # "A"/"B"/"C"/"D" -> tensor_map.TensorMapSpec
    cluster: tuple | None = None          # thread-block cluster dimensions: expressions, x first
    arch: str | None = None               # the compile target it needs ("sm_90a"); None: the device's
    compiler: str | None = None           # "nvcc" | "nvrtc" when the entry pins one; None: the run's choice
    sources: tuple[Path, ...] = ()        # other sources whose device code the kernel calls (nvcc -rdc)
    resources: str | None = None          # a claim on ptxas's report (RESOURCE_CLAIMS); None: information only
    sizes: tuple[int, int, int] | None = None    # (M, N, K) compiled into a kernel that takes no size
    namespace: str = ""                   # the named namespaces `entry` is declared in ("mylib::kernels")
    scratch: dict = field(default_factory=dict)   # scratch role -> its bytes (launch.Expression): launch.SCRATCH_ROLES
    scratch_zeroed: bool = True           # callers zero the scratch before every launch (else it holds garbage)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)
        if not self.roles:
            set_("roles", SIGNATURE_ROLES.get(self.signature, SIGNATURE_ROLES["mnk"]))
        set_("layouts", {name: self.layouts.get(name, "row") for name in launch.OPERAND_ROLES})
        params = {k: tuple(v) for k, v in self.params.items()}
        if self.tiles and not self.configs:
            params[self.tile_param] = tuple(self.tiles)   # `tiles` wins, so dataclasses.replace(tiles=) works
        set_("params", params)
        # read for every test id and label (12,000 times a ci collection): computed once
        set_("_has_tile", any(self.tile_param in a for _, a in self.assignments()))
        if not self.tiles:
            set_("tiles", tuple(dict.fromkeys(a[self.tile_param] for _, a in self.assignments()
                                              if self.tile_param in a)))
        if self.policy is not None or self.geometry is None:   # a named policy wins, as tiles do
            set_("geometry", launch.POLICIES[self.policy or "tile2d"].geometry(self.tile_param))
        if self.sizes is not None:   # the one shape a kernel with its sizes compiled in computes
            set_("shapes", "M == {} and N == {} and K == {}".format(*self.sizes))
        set_("_scope", None if self.shapes in SHAPES else launch.Expression(self.shapes))
        # every operand's type, per dtypes entry: resolved once, read by everything downstream
        accumulator = lambda name: self.accumulator.get(name) if isinstance(self.accumulator, dict) else self.accumulator
        set_("types", {name: operand_types.resolve(name, accumulator=accumulator(name), scalar=self.scalar,
                                                   scales=self.scales, saturate=self.saturates_output,
                                                   **({"epilogue": self.epilogue} if self.epilogue else {}))
                       for name in self.dtypes})
        if self.sums is not None:   # each instantiation's sums, checked now (a TypesError names what is wrong)
            for name, values in itertools.product(self.dtypes, [a for _, a in self.assignments()]):
                try:
                    self.instance_types(name, values)
                except launch.ExpressionError as exc:
                    raise operand_types.TypesError(f"sums.chain: {exc}") from None
        if self.geometry.shared_bytes.text.strip() != "0" or self.unsimulated_features:
            set_("gpu_only", True)   # cpu-sim models neither dynamic (extern) shared memory nor Hopper's TMA

    def __hash__(self):
        return hash((self.name, str(self.source), str(self.catalog)))

    def __eq__(self, other):
        return isinstance(other, KernelSpec) and self.__dict__ == other.__dict__

    @property
    def unsimulated_features(self) -> tuple[str, ...]:
        """What the kernel is declared to use that the CPU simulator does not model."""
        found = []
        if any(r in launch.TENSOR_MAP_ROLES for r in self.roles):
            found.append("TMA tensor maps")
        if self.cluster is not None:
            found.append("thread-block clusters")
        if self.arch is not None:
            found.append(f"the {self.arch} compile target")
        if self.sources:
            found.append("device code linked from other sources")
        return tuple(found)

    def simulator_skip_reason(self) -> str:
        """Why the CPU simulator does not run this gpu_only kernel: one reason for all its tests."""
        if self.unsimulated_features:
            return (f"{self.name} uses {' / '.join(self.unsimulated_features)}, which the CPU simulator "
                    "does not model; run it with --gemm-backend cupy on a GPU")
        return (f"{self.name} is gpu_only in its catalog: its author says it needs what the CPU simulator "
                "does not model (docs/cpu-simulator-device-api.md); run it with --gemm-backend cupy on a GPU")

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
        return self._has_tile

    def name_expression(self, dtype: str, tile: int | None = None, params: dict | None = None) -> str:
        """The C++ name of one instantiation: ``matmul_tiled<float, 32>``, or ``entry`` if not a template."""
        entry = f"{self.namespace}::{self.entry}" if self.namespace else self.entry   # as code outside calls it
        if not self.template_args.strip():
            return entry
        values = dict(params if params is not None else {self.tile_param: tile})
        args = self.template_args.format(**type_arguments(self.types_of(dtype)), **values)
        return f"{entry}<{args}>"

    def instance_types(self, dtype: str, params: dict) -> operand_types.OperandTypes:
        """types_of(dtype) with what adds the products at these parameters (``sums``: its chain
        evaluated; 0 or no chain: the whole K)."""
        types = self.types_of(dtype)
        if self.sums is None:
            return types
        chain = self.sums_chain.integer(params) if self.sums_chain is not None else 0
        return types.with_sums(self.sums, chain)

    def types_of(self, dtype: str) -> operand_types.OperandTypes:
        """The record of one of the entry's dtypes (or of any plain dtype name)."""
        return self.types.get(dtype) or operand_types.of(dtype)

    def shared_bytes(self, dtype: str, tile: int) -> int | None:
        """Static shared memory the catalog declares for one instantiation (None: not declared)."""
        if self.shared_tiles is None:
            return None
        return self.shared_tiles * tile * (tile + self.shared_pad) * self.types_of(dtype).A.itemsize

    def supports(self, M: int, N: int, K: int, tile: int | None = None, params: dict | None = None) -> bool:
        """Whether the kernel claims to be correct on this shape at these parameters."""
        params = dict(params if params is not None else {self.tile_param: tile})
        tile = params.get(self.tile_param, tile)
        if self.square_only and not (M == N == K):
            return False
        if self.sizes is not None:
            return (M, N, K) == self.sizes
        if self._scope is not None:
            return self._scope.holds({**params, "M": M, "N": N, "K": K})
        if self.shapes == "square-tile-multiple":
            return M == N == K and M % tile == 0
        if self.shapes == "tile-multiple":
            return M % tile == 0 and N % tile == 0 and K % tile == 0
        return True

    @property
    def square_only(self) -> bool:
        return square_only(self.roles, self.sizes)

    def describe_shapes(self) -> str:
        if self.sizes is not None:
            return "M x N x K = {} x {} x {} only (the sizes compiled into it)".format(*self.sizes)
        return SHAPES.get(self.shapes, self.shapes)

    def instances(self) -> list["Instance"]:
        return [Instance(self, d, params=values, config=name)
                for d in self.dtypes for name, values in self.assignments()]


def square_only(roles, sizes) -> bool:
    """Whether a kernel takes square problems only: it takes one size (N: N x N operands), or
    none and reads it from its launch; a kernel with its sizes compiled in takes that shape."""
    return not {"M", "K"} & set(roles) and sizes is None


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
        return f"{self.spec.name}-{self.dtype}" + (f"-{self.variant}" if self.variant else "")

    @property
    def declared_tile(self) -> int | None:
        """Its TILE where its kernel has a tile parameter (KernelSpec.has_tile), else None: what
        tables, labels and messages may name (`tile` of a kernel without one is only the edge
        test shapes are drawn around)."""
        return self.tile if self.spec.has_tile else None

    @property
    def variant(self) -> str:
        """Which of its kernel's instantiations this is, as its id ends: ``TILE32``, a config's
        name, ``BM128_BN128``; "" for a kernel with no compile-time parameter (never a TILE:
        its `tile` is only the edge test shapes are drawn around)."""
        return self.config or "_".join(f"{k}{v}" for k, v in self.params.items())

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
    def types(self) -> operand_types.OperandTypes:
        """Every operand's type in this instantiation (gemmcheck.contract.operand_types), with
        what adds its products (the entry's ``sums``, its chain evaluated at these parameters)."""
        return self.spec.instance_types(self.dtype, self.params)

    @property
    def dt(self) -> dt.DType:
        """The one element type of a kernel with one (``dtypes = ["float16"]``); a kernel with a
        type per operand has none: read ``types``."""
        if not self.types.uniform:
            raise TypeError(f"{self.id}: {self.types.describe()}: a type per operand; read Instance.types")
        return self.types.A

    @functools.cached_property
    def parameters(self) -> tuple | None:
        """Its kernel's parameters as declared, each with its C type in this instantiation
        (gemmcheck.contract.parameters), read once; None where the source does not declare it
        readably."""
        return parameters.of(self)

    def supports(self, M: int, N: int, K: int) -> bool:
        return self.spec.supports(M, N, K, params=self.params)

    @property
    def grouped(self) -> str:
        """"contiguous" or "masked" for a grouped GEMM (it takes group_offsets or group_counts), else ""."""
        roles = self.spec.roles
        return "contiguous" if "group_offsets" in roles else "masked" if "group_counts" in roles else ""

    @property
    def batched(self) -> bool:
        """Whether the kernel runs a batch of products in one launch: it takes `batch` (strided),
        or arrays of pointers (pointer_arrays; told the count, or given a block per product)."""
        return "batch" in self.spec.roles or bool(self.pointer_arrays)

    @property
    def pointer_arrays(self) -> tuple[str, ...]:
        """The operands passed as arrays of pointers to a batch's products (A for A_array)."""
        return launch.pointer_arrays(self.spec.roles)

    def launch_shape(self, M: int, N: int, K: int, batch: int = 1, groups: int = 1):
        """(grid, block) for a problem (of `batch` products, or `groups`), from the kernel's geometry."""
        grid, block, _ = self.spec.geometry.evaluate({**self.params, "M": M, "N": N, "K": K, "batch": batch,
                                                      "groups": groups})
        return grid, block


def type_arguments(types: operand_types.OperandTypes) -> dict[str, str]:
    """What template_args' type placeholders stand for: {T} (A's C type, the one type of a
    one-type kernel), {A}, {B}, {C}, {D} and {ACC} (the accumulator)."""
    return {"T": types.A.c_type, **{r: types.of(r).c_type for r in operand_types.OPERANDS},
            "ACC": types.accumulator.c_type}


def by_build_unit(instances) -> dict[tuple, list[Instance]]:
    """Instantiations grouped by Instance.build_unit, each once, in the order given."""
    units: dict[tuple, list[Instance]] = {}
    for inst in dict.fromkeys(instances):
        units.setdefault(inst.build_unit, []).append(inst)
    return units
