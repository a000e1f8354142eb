"""A fleet on Kubernetes (a real control plane, helm, the deployctl CLI): 4 MindIE replicas of 2 servers each
(inventories/examples/a2-fleet-4x2x8-dp-ep.yaml), one StatefulSet per instance, the Service over every instance's
master pod. An env change restarts the instances one at a time: deployctl deletes one instance's pods, follows
its new pods until ready, then the next (the API server's audit log shows the order); --strategy recreate
deletes them all at once."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import EXAMPLES
from kube_e2e import READY, cli, get, objects, servers

STEM = "a2-fleet-4x2x8-dp-ep"
PREFIX = "r1-fleet-ascend-llm"


def inventory(tmp_path: Path, cluster, ns: str, level: str) -> Path:
    doc = yaml.safe_load((EXAMPLES / f"{STEM}.yaml").read_text())
    doc["engine"]["env"] = {"MINDIE_LOG_LEVEL": level}
    doc["kubernetes"] = {"namespace": ns, "kubeconfig": str(cluster.kubeconfig)}
    path = tmp_path / f"inv-{level}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def deleted_instances(cluster, mark: int, ns: str) -> list[str]:
    out = []
    for w in cluster.writes(mark, namespace=ns):
        if w["verb"] in ("delete", "deletecollection") and w["kind"] == "Pod" and w["code"] in (200, 202):
            name = w["name"] or w["uri"]
            inst = next(f"mixed-{k}" for k in range(4) if f"mixed-{k}" in name)
            if not out or out[-1] != inst:
                out.append(inst)
    return out


def test_fleet_instances_restart_one_at_a_time(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inventory(tmp_path, cluster, ns, "info")), "-y",
              "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    sets = objects(cluster, "StatefulSet", ns)
    per_instance = {s["metadata"]["labels"]["deployctl.io/instance"] for s in sets}
    assert per_instance == {f"mixed-{k}" for k in range(4)}, [s["metadata"]["name"] for s in sets]
    service = get(cluster, "Service", ns, PREFIX)
    assert service["spec"]["selector"].get("deployctl.io/rank-role") == "master"     # every instance's master

    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inventory(tmp_path, cluster, ns, "debug")), "-y",
              "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert deleted_instances(cluster, mark, ns) == ["mixed-0", "mixed-1", "mixed-2", "mixed-3"]
    out = res.stdout
    steps = [out.index(f"instance mixed-{k}: restarting") for k in range(4)]
    assert steps == sorted(steps) and "one instance at a time" in out
    for k in range(3):      # each instance was followed until ready before the next one was deleted
        assert "ready:" in out[steps[k]:steps[k + 1]], out

    mark = cluster.audit_mark()
    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inventory(tmp_path, cluster, ns, "warn")), "-y",
              "--ready-timeout", READY, "--strategy", "recreate")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all its pods together" in res.stdout
    text = res.stdout
    first_ready = text.index("ready:", text.index("instance mixed-0: restarting"))
    assert all(text.index(f"instance mixed-{k}: restarting") < first_ready for k in range(4))
