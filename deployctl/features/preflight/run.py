"""Run preflight: resolve SSH targets, probe every host in parallel (two phases), judge the facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from deployctl import __version__
from deployctl.io.executor import Executor, HostTarget, fan_out_width
from deployctl.core.models.host_facts import FactsFile, Finding, HostFacts
from deployctl.core.models.inventory import Inventory
from deployctl.features.preflight import probes
from deployctl.io.batch import PROBE_CONCURRENCY
from deployctl.io.fanout import HostRun, Progress, fan_out_pipelined
from deployctl.io.targets import ssh_targets
from deployctl.features.preflight.rules import check_facts, check_gaps, not_checked, sort_findings
from deployctl.features.preflight.weights_files import merge, weights_findings


@dataclass
class PreflightResult:
    facts: dict[str, HostFacts]
    findings: list[Finding]
    not_checked: list[str]
    gaps: list[dict] = field(default_factory=list)   # needs-facts notes, each with "discovered" (judge_gaps)

    @property
    def failed(self) -> bool:
        return any(f.severity == "FAIL" for f in self.findings)

    def to_file(self, inv: Inventory) -> FactsFile:
        return FactsFile(deployctl_version=__version__, cluster=inv.cluster.name,
                         collected_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         hosts=self.facts, findings=self.findings, not_checked=self.not_checked)


def run_preflight(inv: Inventory, base_dir: Path, executor: Executor, *, timeout: float = 60,
                  workers: int | None = None, ping_sample: int = 16, progress: Progress | None = None,
                  layout=None) -> PreflightResult:
    """Probe all hosts (read-only) and judge them. Unreachable hosts become findings, not exceptions.

    Phase 1 probes each host (at most PROBE_CONCURRENCY probes at once per host); phase 2 has each host
    ping a sample of its peers' device IPs over the NPU network. A host's pings start as soon as the
    facts they need are in (its own and those of the peers it pings, probes.host_ping_checks), not after
    the slowest host's phase 1; they are the pings probes.ping_plan picks from all the facts. ``layout``:
    the operation's plan (up's), for the rule on free ports; without it that rule plans.
    """
    hw = inv.cluster.hardware
    targets = ssh_targets(inv, base_dir)
    commands = probes.host_commands(hw, inv.engine.image, inv.model.weights_path, inv.engine_spec.image_packages)
    order = [t.name for t in targets]
    by_name = {t.name: t for t in targets}
    facts: dict[str, HostFacts] = {}
    ips: dict[str, list] = {}             # device IPs of the hosts probed so far
    plan: dict[str, list] = {}

    def host_facts(run: HostRun) -> HostFacts:
        if run.error is not None:
            return HostFacts(name=run.target.name, address=run.target.address, error_kind=run.error.kind,
                             error=run.error.message, error_hint=run.error.hint, seconds=round(run.seconds, 3))
        return probes.assemble(run.target, hw, run.outputs, run.clock_offset_s, run.seconds)

    def pings_now(run: HostRun) -> list[tuple[HostTarget, list]]:
        """Record a host's facts; start the pings of every host whose peers are now known."""
        facts[run.target.name] = host_facts(run)
        ips[run.target.name] = probes.device_ips(facts[run.target.name])
        ready = []
        for name in order:
            if name in ips and name not in plan:
                checks = probes.host_ping_checks(name, order, ips, ping_sample)
                if checks is not None:
                    plan[name] = checks
                    if checks:
                        ready.append((by_name[name], probes.ping_commands(checks)))
        return ready

    def ping_progress(host: str, what: str) -> None:
        if progress:
            progress(host, f"peer pings: {what}")

    _, pings = fan_out_pipelined(executor, targets, lambda t: commands, pings_now, timeout, workers, progress,
                                 ping_progress, parallel=PROBE_CONCURRENCY, follow_parallel=True)
    facts = {name: facts[name] for name in order}
    for name, run in pings.items():
        if run.error is None:
            facts[name] = facts[name].model_copy(
                update={"pings": probes.ping_results(plan[name], run.outputs)})
    extra, notes = weights_findings(inv.model.weights_path, targets, executor, facts, timeout)
    findings = merge(check_facts(inv, facts, layout), extra, inv.model.weights_path)
    return PreflightResult(facts, sort_findings(inv, findings),
                           not_checked(inv, facts, ping_sample) + notes)


def judge_gaps(inv: Inventory, gaps: list, result: PreflightResult, problems_with: Callable[[Any], list]) -> None:
    """After discovery: which needs-facts notes (what the inventory leaves out) the facts filled.

    The inventory is validated again with the facts applied, as `plan --facts` will: a gap it still has
    becomes a ``needs-facts`` FAIL (on reachable hosts; unreachable ones already fail). Sets result.gaps
    (each note with ``discovered``) and adds the findings. ``problems_with(facts)``: the inventory's problems when
    validated with those facts (the composition root's validation: app/inventory.py inventory_problems).
    """
    from deployctl.core.errors import InventoryError
    from deployctl.core.input.gaps import NeedsFacts

    if not gaps:
        result.gaps = []
        return
    try:
        problems = problems_with(result.to_file(inv))
    except InventoryError:        # the structure was valid before; facts cannot break it
        problems = []
    left = [p for p in problems if isinstance(p, NeedsFacts)]
    still = {(p.node, p.what) for p in left}
    result.gaps = [{**g.to_dict(), "discovered": (g.node, g.what) not in still} for g in gaps]
    extra = check_gaps(inv, result.facts, left)
    if extra:
        result.findings = sort_findings(inv, result.findings + extra)
