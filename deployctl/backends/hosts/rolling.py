"""Rolling update: with two or more instances behind a router, `up` changes them a few at a time
(``--max-unavailable``, default 1) so the others keep serving.

For each batch of instances that change: take them out at the router (no new requests), wait until the
requests in flight on them are done (``--drain-timeout``), restart them with the new revision (the same
playbook as an all-at-once `up`, limited to their hosts), read back what their hosts run (revision,
environment, health), put them back at the router and wait until it sends to them again; then the next batch.
A failing batch stops the rollout: the pipeline restores that batch's hosts to what they ran and puts them
back; the batches before it keep the new revision, the ones after it the old one (`status` shows which).

`--strategy recreate` (or a deployment the router cannot drain) restarts every changed instance at once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from deployctl.backends.common.pipeline import Applied, Reporter, Verification
from deployctl.backends.hosts.router_control import RouterControl, wait_until
from deployctl.backends.hosts.runstate import HostsRun, Rollout
from deployctl.core.models.deploy import ChangeSet
from deployctl.core.models.plan import Plan

__all__ = ["BatchSteps", "Rollout", "moving_instances", "plan_rollout", "put_back", "roll"]

SERVE_TIMEOUT = 120      # s: the router sees a restarted, verified instance healthy (a few health-check periods)


@dataclass(frozen=True)
class BatchSteps:
    """What a rolling update does to one batch's hosts: the hosts backend's own steps, handed in."""

    restart: Callable[[set[str]], Applied]           # the up playbook, limited to these nodes
    read_back: Callable[[list[str]], Verification]   # what these nodes run (revision, env, health) vs the intent
    smoke: Callable[[list[str]], str]                # these instances' own endpoints answer: "" or what went wrong


def moving_instances(plan: Plan, changes: ChangeSet) -> list[str]:
    moving = {h.instance for h in changes.hosts if h.action != "keep"}
    return [i.name for i in plan.instances if i.name in moving]


def plan_rollout(plan: Plan, changes: ChangeSet, control: RouterControl | None, strategy: str,
                 max_unavailable: int) -> tuple[Rollout | None, str]:
    """(the rollout, "") or (None, why the change goes all at once)."""
    if strategy != "rolling":
        return None, "--strategy recreate"
    if control is None:
        return None, "no router that can take an instance out in front of these instances"
    moving = moving_instances(plan, changes)
    if not moving:
        return None, "no instance restarts"
    if any(h.ms_action not in (None, "keep") for h in changes.hosts):
        return None, "the router itself starts or restarts"
    routed = set(control.routed())
    if not set(moving) <= routed:
        return None, f"{', '.join(sorted(set(moving) - routed))} cannot be taken out at {control.what}"
    alone = [r for r in ("mixed", "prefill", "decode")
             if len(plan.role(r)) == 1 and any(i in moving for i in (x.name for x in plan.role(r)))]
    if alone:
        # nothing would serve that role while its only instance restarts: all at once (and all-or-nothing)
        return None, f"{' and '.join(alone)} has a single instance"
    warnings, batches = [], []
    for role in ("mixed", "prefill", "decode"):
        of_role = [i.name for i in plan.role(role)]
        these = [i for i in moving if i in of_role]
        # at least one instance of the role stays in the router
        step = max(1, min(max_unavailable, len(of_role) - 1))
        if max_unavailable > step and these:
            warnings.append(f"{role}: {step} instance(s) at a time (one of its {len(of_role)} keeps serving)")
        batches += [these[k:k + step] for k in range(0, len(these), step)]
    actions: dict[str, set[str]] = {}
    for h in changes.hosts:
        actions.setdefault(h.instance, set()).add(h.action)
    new = frozenset(i for i in moving if actions.get(i) == {"start"})
    return Rollout(control, batches, warnings, new), ""


def roll(plan: Plan, rollout: Rollout, state: HostsRun, steps: BatchSteps, reporter: Reporter,
         drain_timeout: float, cancel: threading.Event) -> Applied:
    """Run the batches (see the module docstring) with the backend's ``steps``. ``state``: the run's; it says
    which batch is out of the router (``rolling_batch``) and which of its nodes changed (``moved``: the undo
    restores them), and ends with every changed node in ``moved``. A router or host that cannot be talked to ends
    the rollout like a failed instance (restored and put back), never with a traceback."""
    from deployctl.core.errors import DeployctlError

    for w in rollout.warnings:
        reporter.failure(f"! {w}")
    all_moved = list(state.moved)
    try:
        for k, batch in enumerate(rollout.batches, start=1):
            applied = _batch(plan, rollout.control, batch, f"{k}/{len(rollout.batches)}", all_moved, state, steps,
                             reporter, drain_timeout, cancel, new=rollout.new)
            if not applied.ok:
                return applied
    except DeployctlError as exc:
        return Applied(False, f"rolling update stopped: {exc.message}")
    state.rolling_batch = []
    state.moved = all_moved
    return Applied(True)


def _batch(plan: Plan, ctl: RouterControl, batch: list[str], step: str, all_moved: list[str], state: HostsRun,
           steps: BatchSteps, rep: Reporter, drain_timeout: float, cancel: threading.Event,
           new: frozenset[str] = frozenset()) -> Applied:
    nodes = [n for i in batch for n in plan.instance(i).nodes]
    names = ", ".join(batch)
    role = plan.instance(batch[0]).role
    others = [i.name for i in plan.role(role) if i.name not in batch]
    if not any(ctl.serving(i) for i in others):
        return Applied(False, f"{names}: no other {role} instance serves at {ctl.what} ({ctl.view()}): taking it "
                       "out would stop the service; nothing was restarted (fix or restart the others first, or "
                       "--strategy recreate)")
    state.rolling_batch, state.moved = list(batch), []       # nothing to restore until its hosts change
    if set(batch) <= new:
        # nothing runs there yet (an instance scale adds): nothing to drain; the router is told once it is verified
        rep.step(f"rolling update {step}: {names}: new, starting {', '.join(nodes)}")
    else:
        rep.step(f"rolling update {step}: {names}: out of {ctl.what}")
        for i in batch:
            ctl.drain(i)
        if not wait_until(lambda: all(ctl.in_flight(i) == 0 for i in batch), drain_timeout, cancel):
            if cancel.is_set():
                return Applied(False, "interrupted (Ctrl-C)", canceled=True)
            left = ", ".join(_in_flight(ctl, i) for i in batch)
            return Applied(False, f"{names}: requests still in flight after {drain_timeout} s of draining "
                           f"({left}); nothing was restarted (raise --drain-timeout for long generations)")
        rep.step(f"  {names}: no request in flight; restarting {', '.join(nodes)}")
    state.moved = [n for n in nodes if n in all_moved]
    applied = steps.restart(set(nodes))
    if not applied.ok:
        return applied
    check = steps.read_back(nodes)
    if not check.ok:
        return Applied(False, f"{names} after its restart: {check.summary()}")
    answer = steps.smoke(batch)          # its own endpoint answers, before clients reach it again
    if answer:
        return Applied(False, f"{names} after its restart: {answer}")
    for i in batch:
        ctl.ready(i)
    if not wait_until(lambda: all(ctl.serving(i) for i in batch), SERVE_TIMEOUT, cancel):
        if cancel.is_set():
            return Applied(False, "interrupted (Ctrl-C)", canceled=True)
        return Applied(False, f"{names} runs the new revision but {ctl.what} does not send to it after "
                       f"{SERVE_TIMEOUT} s ({ctl.view()})")
    rep.step(f"  ✓ {names}: new revision, serving at {ctl.what}")
    return Applied(True)


def _in_flight(ctl: RouterControl, instance: str) -> str:
    """``instance: N`` requests in flight, or why the router's answer cannot tell (a bad number is said)."""
    n = ctl.in_flight(instance)
    why = getattr(ctl, "unknown", {}).get(instance)
    return f"{instance}: cannot tell ({why})" if why else f"{instance}: {n}"


def put_back(state: HostsRun, reporter: Reporter) -> None:
    """After the pipeline restored a failed batch: the router sends to it again (best effort, said)."""
    rollout, batch = state.rollout, state.rolling_batch
    if rollout is None or not batch:
        return
    for i in batch:
        if i in rollout.new:
            continue           # it never served: the router was never told of it
        try:
            rollout.control.ready(i)
        except Exception as exc:   # noqa: BLE001 - said, and status shows it
            reporter.failure(f"! could not put {i} back at {rollout.control.what}: {exc}")
