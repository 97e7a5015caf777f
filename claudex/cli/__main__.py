"""`python -m claudex.cli`: the same as the `claudex` command (tests, the soak and the e2e
harness start `claudex serve` so, with the interpreter they run under)."""

import sys

from claudex.cli.parser import main

if __name__ == "__main__":  # not when a walk over the package imports it
    sys.exit(main())
