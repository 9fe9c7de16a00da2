"""``python -m wmrl.cli ...``: the ``wmrl`` command run by this interpreter (benchmarks and tests use it)."""

import sys

from wmrl.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
