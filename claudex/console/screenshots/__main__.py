"""`python -m claudex.console.screenshots [OUT_DIR]` (`make screenshots`)."""

import sys

from claudex.console.screenshots.scenes import main

sys.exit(main())
