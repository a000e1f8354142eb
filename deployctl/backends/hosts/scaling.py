"""The host effects of removing an instance `deployctl scale` added: stop its engine container (what `down` does,
on its nodes only), read back that none is left, and write the `scale-down` entry of the hosts' history.

The entry names the revision every remaining node runs (read back from it), so `history` shows it as the live
deployment; the removed nodes keep their files (their revision directories), as after `down`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from deployctl.backends.hosts import history as hist
from deployctl.backends.hosts.remote import container_names, read_deployed
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.core.errors import ExecutionError
from deployctl.core.models.hostdata import clean_entry, seal
from deployctl.core.models.plan import Plan
from deployctl.io.executor import Executor, HostError, HostTarget


def stop_instance(plan: Plan, instance: str, executor: Executor, targets: dict[str, HostTarget],
                  timeout: float = 60) -> None:
    """`docker rm -f` the engine container on each node of ``instance`` (down.yml's task, by argv), then read back
    that none runs there.

    Raises:
        ExecutionError: a node could not be reached, or its engine container is still there.
    """
    engine, _router = container_names(plan)
    nodes = list(plan.instance(instance).nodes)
    for node in nodes:
        try:
            executor.run(targets[node], ["docker", "rm", "-f", engine], timeout)
        except HostError as exc:
            raise ExecutionError(f"{node}: {exc.message}", hint="check SSH to that host; the instance is out of "
                                 "the router already") from None
    states = read_deployed(plan, [targets[n] for n in nodes], executor, cluster_dir(plan), timeout=timeout)
    left = [n for n in nodes if states[n].error or (states[n].containers.get(engine) is not None
                                                     and states[n].containers[engine].status != "absent")]
    if left:
        why = "; ".join(f"{n}: {states[n].error or states[n].containers[engine].status}" for n in left)
        raise ExecutionError(f"{instance}'s engine container is still there after docker rm -f: {why}",
                             hint="remove it by hand (docker rm -f), then run `deployctl scale --apply` again")


def scale_down_entry(plan: Plan, run_id: str, why: str, executor: Executor, targets: list[HostTarget],
                     timeout: float = 60) -> list[str]:
    """Write the `scale-down` history entry on every node of ``plan`` (the deployment without the removed
    instance): the revision and files each runs, read back. The hosts where it was not written."""
    from deployctl import __version__
    from deployctl.backends.common.lockinfo import operator_name
    from deployctl.io.fanout import run_script

    cdir = cluster_dir(plan)
    states = read_deployed(plan, targets, executor, cdir, timeout=timeout)
    nodes = {n: s.current_rev for n, s in states.items() if not s.error and s.current_rev}
    entry = {"revision": hist.next_revision(hist.merge(states)), "run_id": run_id,
             "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "user": operator_name(),
             "deployctl": __version__, "operation": "scale-down", "result": "successful",
             "summary": why[:500], "nodes": nodes,
             "files": {n: dict(states[n].files) for n in nodes}}
    argv = hist.write_argv(cdir, seal(clean_entry(entry)))
    reachable = [t for t in targets if not states[t.name].error]
    return run_script(executor, reachable, lambda t: argv, timeout) + \
        [f"{n}: {s.error}" for n, s in states.items() if s.error]
