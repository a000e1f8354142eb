"""Compare what a node should run with what it was observed to run (pure; used by verify and status).

What a node runs is read from the container, not from deployctl's own records: the revision directory
the engine container mounts at engine.work_dir, its state and exit code, its environment against the
env file of that revision, and the health endpoint. The `current` link is a record; when it names
another revision than the container mounts, that is drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from deployctl.backends.common.pipeline import UnitCheck, Verification
from deployctl.backends.hosts.remote import env_digest
from deployctl.core.models.deploy import ContainerState, DeployedState
from deployctl.core.models.plan import Plan


@dataclass(frozen=True)
class Want:
    """What one node should run: a revision (None = nothing) and its env file's digest and keys."""

    rev: str | None
    env_digest: str = ""
    env_keys: tuple[str, ...] = ()
    router: bool = False          # the router containers the engine's driver names must run too
    smoke: bool = False           # this node answered (or must answer) the smoke request


def container_env_digest(c: ContainerState, keys: tuple[str, ...]) -> str:
    return env_digest({k: c.env[k] for k in keys if k in c.env})


def engine_problems(state: DeployedState, engine: str, want: Want, router_names: tuple[str, ...] = ()) -> list[str]:
    """Why a node does not run ``want`` (empty: it does). The first cause is the most basic one."""
    if state.error:
        return [f"unreachable: {state.error}"]
    c = state.containers.get(engine)
    running = c is not None and c.status == "running"
    if want.rev is None:
        return [f"engine container still {c.status}"] if c is not None and c.status != "absent" else []
    out = []
    if c is None or c.status == "absent":
        out.append("no engine container")
    elif not running:
        out.append(f"engine container {c.status}" + (f" (exit code {c.exit_code})" if c.exit_code is not None
                                                     else ""))
    elif c.mounted_rev != want.rev:
        out.append(f"the container runs revision {c.mounted_rev or '(none mounted)'}, not {want.rev}")
    elif want.env_keys and container_env_digest(c, want.env_keys) != want.env_digest:
        out.append("the container's environment differs from its revision's env file")
    if state.current_rev != want.rev:
        out.append(f"`current` names revision {state.current_rev or '(none)'}")
    if running and state.ready is False:
        out.append("a health check of the engine did not answer 200")
    if want.router:
        for name in router_names:
            m = state.containers.get(name)
            if m is None or m.status != "running":
                out.append(f"{name.rsplit('-', 1)[-1]} {m.status if m else 'absent'}")
    return out


def describe_running(state: DeployedState, engine: str) -> str:
    if state.error:
        return "unknown (unreachable)"
    c = state.containers.get(engine)
    if c is None or c.status == "absent":
        return "no engine container"
    ready = {True: ", ready", False: ", not ready", None: ""}[state.ready]
    return f"revision {c.mounted_rev or '?'} {c.status}{ready}"


def verify_nodes(plan: Plan, wants: dict[str, Want], states: dict[str, DeployedState], engine: str,
                 router_names: tuple[str, ...], smoke: dict[str, str] | None = None,
                 nodes: list[str] | None = None) -> Verification:
    """One UnitCheck per node (of ``nodes``, default all): observed state against ``wants``; smoke answers
    from the run's events."""
    units = []
    for node in plan.nodes:
        if nodes is not None and node.name not in nodes:
            continue
        want = wants[node.name]
        state = states[node.name]
        causes = engine_problems(state, engine, want, router_names)
        observed = describe_running(state, engine)
        if want.smoke:
            answer = (smoke or {}).get(node.name)
            if answer is None:
                causes.append("the smoke request did not answer (it did not run, or failed)")
            else:
                observed += f", smoke answered {answer[:40]!r}"
        intended = f"revision {want.rev}, running and ready" if want.rev else "no engine container"
        units.append(UnitCheck(node.name, intended, observed, not causes, "; ".join(causes)))
    return Verification(units)
