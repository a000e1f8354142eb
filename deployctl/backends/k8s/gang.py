"""Gang scheduling on the cluster (kubernetes.gang): which PodGroup API `auto` means there, and the release's
PodGroups as `status` reports them.

auto -> volcano when the API server serves Volcano's PodGroup (scheduling.volcano.sh/v1beta1: a cluster with Volcano
installed, as MindCluster's are), else kubernetes when it serves the Kubernetes 1.36 PodGroup
(scheduling.k8s.io/v1alpha2, alpha), else off: pods are scheduled one by one, as plain StatefulSets are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deployctl.backends.k8s.readback import text

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan

# (kubernetes.gang, group, version) of each PodGroup API, in the order auto tries them
APIS = (("volcano", "scheduling.volcano.sh", "v1beta1"), ("kubernetes", "scheduling.k8s.io", "v1alpha2"))


def served(api) -> str:
    """The first PodGroup API the cluster serves (volcano, kubernetes), else off."""
    return next((name for name, group, version in APIS if api.serves(f"{group}/{version}", "PodGroup")), "off")


def with_gang(plan: Plan, api) -> Plan:
    """The plan with kubernetes.gang `auto` resolved against the cluster (other values are the user's own)."""
    k = plan.inventory.kubernetes
    if k.gang != "auto":
        return plan
    inv = plan.inventory.model_copy(update={"kubernetes": k.model_copy(update={"gang": served(api)})})
    return plan.model_copy(update={"inventory": inv})


def pod_groups(api, servers: dict[str, int]) -> list[str]:
    """What `status` says about gang scheduling: the release's PodGroups (API, minimum, phase or condition) against
    its instances (``servers``: instance -> pods), or that there are none."""
    lines = []
    for name, group, version in APIS:
        if not api.serves(f"{group}/{version}", "PodGroup"):
            continue
        for pg in api.custom_objects(group, version, "podgroups"):
            meta, spec, status = pg.get("metadata") or {}, pg.get("spec") or {}, pg.get("status") or {}
            inst = text((meta.get("labels") or {}).get("deployctl.io/instance", "?"))
            minimum = text(spec.get("minMember") if name == "volcano" else
                            ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount"))
            state = text(status.get("phase")) if name == "volcano" else next(
                (f"{text(c.get('type'))}={text(c.get('status'))}" for c in (status.get("conditions") or [])[:16]
                 if isinstance(c, dict)), "")
            want = servers.get(inst)
            lines.append(f"gang ({name}): instance {inst} placed whole or not at all: PodGroup minimum {minimum}"
                         + (f" of its {want} pods" if want is not None else "") + (f", {state}" if state else ""))
    return lines or ["gang: none: the pods are scheduled one by one (an instance can start partly placed); "
                     "kubernetes.gang picks Volcano's or Kubernetes' PodGroups"]
