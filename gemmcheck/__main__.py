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
    args = parser.parse_args(argv)
    if args.command == "draft":
        from gemmcheck.draft import draft_source

        if not args.source.is_file():
            print(f"python -m gemmcheck draft: {args.source}: no such file", file=sys.stderr)
            return 2
        sys.stdout.write(draft_source(args.source, args.catalog_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
