"""`python -m gemmcheck.judge.isolation JOB OUTDIR`: the isolated child (child.child_main)."""

import sys
import time

from gemmcheck.judge.isolation import child

if __name__ == "__main__":
    child._MAIN_AT = time.time()
    sys.exit(child.child_main(sys.argv[1], sys.argv[2]))
