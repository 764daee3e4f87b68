"""``python -m pipelines.training --config job.yaml``."""

import sys

from pipelines.training.cli import main

sys.exit(main())
