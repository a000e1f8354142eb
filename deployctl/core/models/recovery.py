"""`deploy.recovery`: what `deployctl watch` does about a failed instance (docs/watch.md), where it reports its
events, and its probe of an engine that answers its health check but cannot infer (``HangProbe``).

The hang probe follows MindIE-Motor's "virtual inference" (docs/dev/scaling-sources.md "Catching an engine that
answers /health but cannot infer"): a one-token completion to an idle engine, a timeout of 5 s, a failure counted
only while the NPU's AI Cube usage is below 3 % where npu-smi can read it. Its default number of failures is
deployctl's own (below).
"""

from __future__ import annotations

from pydantic import Field

from deployctl.core.models.base import Strict


class HangProbe(Strict):
    """`deployctl watch`: while an instance is idle (its engine's gauges say nothing runs or waits), one 1-token
    completion to its own API each round; `failures` of them in a row that time out or fail make a fault of kind
    `hang`, recovered like a dead engine (docs/watch.md "An engine that answers its health check but cannot
    infer"). The defaults are MindIE-Motor's virtual inference's, but for ``failures``."""

    enabled: bool = Field(True, description=(
        "Probe the idle instances of the engines and roles that can be probed (docs/watch.md lists them). "
        "Nothing is sent while an instance has requests running or waiting."))
    timeout_s: float = Field(5.0, gt=0, le=60, description=(
        "How long one probe may take (5 s: the upstream virtual-inference probe's timeout, docs/watch.md)."))
    failures: int = Field(3, ge=1, le=20, description=(
        "Probes in a row that time out or fail before the instance is hung (deployctl's choice: with the "
        "defaults an idle engine that hangs is reported within 30 s; the upstream probe waits for 6, 5 s apart)."))
    npu_busy_pct: float = Field(3.0, ge=0, le=100, description=(
        "AI Cube usage (`npu-smi info watch -s u`, HDK 26.0.RC1 and later) at or above which a failed probe is "
        "not counted: the NPU is busy (3 %: the upstream probe's threshold). Where npu-smi cannot read it, "
        "failures count."))
    warmup_timeout_s: float = Field(180.0, gt=0, le=3600, description=(
        "How long the first probe after an engine (re)start may take (180 s: the upstream probe's warm-up)."))


class RecoveryHooks(Strict):
    """Where `deployctl watch` reports its events (every one: fault, cleared, drain, restart, back, left out;
    cleaned of escape sequences, bounded and rate-limited, docs/watch.md)."""

    webhook: str | None = Field(None, pattern=r"^https?://[^\s]+$", max_length=2048, description=(
        "POST every event here as one JSON document (Content-Type: application/json, 5 s timeout; a failed POST "
        "is reported, never retried)."))
    command: list[str] | None = Field(None, min_length=1, max_length=64, description=(
        "An argv (no shell) the watch runs for every event, the event as JSON on its stdin (10 s timeout), only "
        "when the operator opts in: `watch --allow-hook-command` or DEPLOYCTL_ALLOW_HOOK_COMMAND=1 (it runs on "
        "the controller as the operator); otherwise it is not run and the watch warns. `watch --hook-command` "
        "gives the operator's own instead."))


class Recovery(Strict):
    """`deployctl watch`: what it does when an instance behind the router fails (off by default: it only
    reports)."""

    enabled: bool = Field(False, description=(
        "Take a failed instance out of the router, restart all of its nodes' containers, verify them from what "
        "the hosts report (container running, health checks or ready lines, NPUs healthy) and put it back."))
    max_restarts: int = Field(3, ge=1, le=100, description=(
        "Restarts of one instance per `watch` run; after the last one fails the instance stays out of the "
        "router and is reported left out (the others keep serving)."))
    backoff_s: float = Field(10.0, ge=0, le=3600, description=(
        "Wait before a retry: backoff_s, then doubled each attempt (also how long an unhealthy NPU gets to "
        "recover before the instance is restarted anyway)."))
    ready_timeout_s: float = Field(300.0, gt=0, le=7200, description=(
        "How long a restarted instance may take to be ready again (model load)."))
    hooks: RecoveryHooks = Field(default_factory=RecoveryHooks, description=(
        "Alerts on every event, with or without recovery enabled."))
    hang_probe: HangProbe = Field(default_factory=HangProbe, description=(
        "Catch an instance that answers its health check but cannot infer (a one-token completion while it is "
        "idle), with or without recovery enabled."))
