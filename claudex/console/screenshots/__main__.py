"""`python -m claudex.console.screenshots [OUT_DIR]` (`make screenshots`)."""

import sys

from claudex.console.screenshots.scenes import main

if __name__ == "__main__":  # not when a walk over the package imports it
    sys.exit(main())
