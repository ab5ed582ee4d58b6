"""Loading catalog files: read the TOML, validate each [[kernel]] table into a KernelSpec, and
check kernel names are unique across every catalog of a run."""

from __future__ import annotations

import tomllib
from pathlib import Path

from gemmcheck.contract.catalog.entry import _spec
from gemmcheck.contract.catalog.model import KernelSpec
from gemmcheck.contract.catalog.vocabulary import NAMED, CatalogError


def read_toml(path: Path, error: type[Exception], what: str) -> dict:
    """The TOML file at `path` as a dict; `error` names the file and the cause in one line."""
    if not path.is_file():
        raise error(f"{path}: {what} file not found")
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:   # TOML is UTF-8 by definition
        raise error(f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                    f"a TOML file is UTF-8: save it as UTF-8") from None
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
