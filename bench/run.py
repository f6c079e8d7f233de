"""Run the benchmark: ``python bench/run.py --help`` (see bench/README.md)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# jobqueue and the bench from the repository, and the example project whose settings the
# bench settings extend; worker subprocesses get the same through PYTHONPATH.
sys.path[:0] = [str(REPO), str(REPO / "testproject")]

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
