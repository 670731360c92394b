"""Entry point of ``python -m harness_nb``."""

import sys

from .cli import main

sys.exit(main())
