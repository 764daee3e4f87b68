import sys

from pipelines.tasks.translation.sources.stage import main

sys.exit(main())
