import sys
from pathlib import Path

# tests/fakes.py is imported as a plain module by the harness's own tests.
sys.path.insert(0, str(Path(__file__).parent))
