"""Pictures and tables of where C is wrong: the error / bound heatmap and the worst elements."""

from __future__ import annotations

import io

import numpy as np

from gemmcheck.arrays import block_reduce

UNWRITTEN_COLOUR = "#000000"   # never written: still the poison
NAN_COLOUR = "#ff00ff"         # inf ratio that is not unwritten: a NaN where none belongs
MAX_CELLS = 160                # larger maps are max-pooled so one bad element stays visible


def heatmap_png(error_map: np.ndarray, tile: int | None, *, unwritten: np.ndarray | None = None,
                title: str = "", max_cells: int = MAX_CELLS) -> bytes:
    """A PNG of error/bound over the output matrix with the TILE grid drawn on it (none for a
    kernel without a tile: `tile` None).

    Finite ratios are coloured on a log scale centred on 1 (the bound): blue is well
    inside it, red outside. ``inf`` marks elements with no finite error: black where
    ``unwritten`` says the poison survived, magenta otherwise (a NaN mismatch). Maps
    with more than ``max_cells`` a side are max-pooled by a power of two (so pooled cells
    line up with power-of-two tiles; inf wins), so no bad element shrinks below a few pixels.
    """
    # The object API, not pyplot: no global figure manager, no backend switch. Fixed margins, not
    # tight_layout (a second full draw), and the grid as two line collections, not one artist per
    # line: a failing test's heatmap took ~0.3 s, 11 s of a run with 28 expected failures.
    from matplotlib.colors import ListedColormap, TwoSlopeNorm
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator, MultipleLocator

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
        finite = block_reduce(finite, step, np.fmax, np.nan)
        unwritten = block_reduce(unwritten, step, np.logical_or, False)
        bad_nan = block_reduce(bad_nan, step, np.logical_or, False)

    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log10(finite)
    lo, hi = -4.0, 4.0
    log_ratio = np.clip(np.where(finite == 0, lo, log_ratio), lo, hi)

    fig = Figure(figsize=(8.5, 7.2), dpi=100)
    fig.subplots_adjust(left=0.08, right=0.91, top=0.91, bottom=0.13)
    ax = fig.add_subplot()
    extent = (0, N, M, 0)  # element coordinates: column j to the right, row i downwards
    image = ax.imshow(log_ratio, cmap="RdYlBu_r", norm=TwoSlopeNorm(vmin=lo, vcenter=0, vmax=hi),
                      interpolation="nearest", extent=extent, aspect="auto")
    for mask, colour in ((unwritten, UNWRITTEN_COLOUR), (bad_nan, NAN_COLOUR)):
        if mask.any():
            ax.imshow(np.ma.masked_where(~mask, mask.astype(float)),
                      cmap=ListedColormap([colour]), interpolation="nearest", extent=extent,
                      aspect="auto", vmin=0, vmax=1)
    lines = max(M, N) / tile if tile else 0
    if not tile:
        grid_note = "no TILE"
    elif lines <= 128:
        style = dict(color="#202020", alpha=0.8, linewidth=0.9 if lines < 32 else 0.4)
        ax.vlines(range(tile, N, tile), 0, M, **style)
        ax.hlines(range(tile, M, tile), 0, N, **style)
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
    for axis, size in ((ax.xaxis, N), (ax.yaxis, M)):
        per = 1   # ticks on tile boundaries, at most ~10 of them
        while tile and size / (tile * per) > 10:
            per *= 2
        axis.set_major_locator(MultipleLocator(tile * per) if tile and size >= tile
                               else MaxNLocator(integer=True))
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def worst_elements_csv(error_map: np.ndarray, run, *, n: int = 20, expected=None) -> str:
    """The ``n`` worst elements (inf first) as CSV: index, tile, ratio, what was stored."""
    error_map = np.asarray(error_map, dtype=np.float64)
    tile = getattr(run.instance, "declared_tile", run.instance.tile)   # None: no tile columns filled
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
        row = [i, j, *((i // tile, j // tile) if tile else ("", "")), f"{error_map[i, j]:.4g}", repr(C[i, j].item()),
               f"0x{int(bits[i, j]):0{width}x}", bool(run.unwritten[i, j])]
        if expected is not None:
            row.insert(6, repr(np.asarray(expected)[i, j].item()))
        rows.append(",".join(str(v) for v in row))
    return "\n".join(rows) + "\n"


