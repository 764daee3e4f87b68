"""What the flow tests read back from the Prefect API, as a user sees it in Prefect's UI."""

from __future__ import annotations


def flow_run_logs(flow_run_id: str) -> str:
    """The messages a flow run (and its task runs) logged, oldest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # logs go to the API in batches: send what is queued, and wait
    with get_client(sync_client=True) as client:
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return "\n".join(log.message for log in logs)
