"""The translation pipeline as a Prefect flow and command line (:data:`flows.task_flows.TRANSLATION`).

    python -m flows.translation --config configs/translation/demo.yaml
"""

import sys

from flows.cli import main
from flows.task_flows import TRANSLATION

if __name__ == "__main__":
    sys.exit(main(TRANSLATION))

#: The flow the deployments run (``prefect.yaml``: ``flows/translation.py:translation_pipeline``).
translation_pipeline = TRANSLATION.flow()
