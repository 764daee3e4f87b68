"""The constituency-parsing pipeline of section 6.3 as a Prefect flow and command line
(:data:`flows.task_flows.PARSING`).

    python -m flows.parsing --config configs/parsing/sample-cpu.yaml
"""

import sys

from flows.cli import main
from flows.task_flows import PARSING

if __name__ == "__main__":
    sys.exit(main(PARSING))

#: The flow the deployments run (``prefect.yaml``: ``flows/parsing.py:parsing_pipeline``).
parsing_pipeline = PARSING.flow()
