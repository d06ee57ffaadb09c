"""`python -m accelenv` runs the command-line interface."""

import sys

from accelenv.cli import main

sys.exit(main())
