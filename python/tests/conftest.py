import sys
from pathlib import Path

# The examples are imported by the tests (the Nile model).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
