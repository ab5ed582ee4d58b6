"""python -m gemmcheck draft FILE.cu: print a catalog entry per kernel of FILE.cu.

(The report tools are ``python -m gemmcheck.report``.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmcheck", description="gemmcheck tools")
    sub = parser.add_subparsers(dest="command", required=True)
    draft = sub.add_parser("draft", help="print a catalog entry (TOML) per kernel of a CUDA source, "
                                         "with a TODO line for each field it could not read")
    draft.add_argument("source", type=Path, metavar="FILE.cu", help="the kernel source")
    draft.add_argument("--catalog-dir", type=Path, default=None, metavar="DIR",
                       help="where the catalog will live: source paths are written relative to it "
                            "(default: the source's directory)")
    draft.add_argument("-I", dest="include_dirs", action="append", type=Path, default=[], metavar="DIR",
                       help="search DIR for the file's own headers too (repeatable); written to each "
                            "entry's include_dirs (default: only the source's directory)")
    args = parser.parse_args(argv)
    if args.command == "draft":
        return _draft(args)
    return 0


def _draft(args) -> int:
    """Print the draft: exit 0 when it drafted a kernel, 1 when the file declares none, 2 for
    a file it cannot read. Every problem is one line on stderr."""
    from gemmcheck.contract import cuda_source
    from gemmcheck.draft import draft, unopened_note

    def fail(message: str, status: int) -> int:
        print(f"python -m gemmcheck draft: {message}", file=sys.stderr)
        return status

    if not args.source.is_file():
        return fail(f"{args.source}: no such file", 2)
    for d in args.include_dirs:
        if not d.is_dir():
            return fail(f"-I {d}: not a directory", 2)
    try:
        drafted = draft(args.source, args.catalog_dir, args.include_dirs)
    except (cuda_source.SourceNotText, OSError) as exc:
        return fail(str(exc), 2)
    sys.stdout.write(drafted.toml)
    for header in drafted.unopened:
        print(f"python -m gemmcheck draft: {unopened_note(args.source.name, header)}", file=sys.stderr)
    if not drafted.kernels:
        return fail(f"{args.source.name} declares no __global__ function (after preprocessing): nothing drafted", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
