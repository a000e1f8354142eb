"""Shared CLI option aliases (one definition per flag)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from enum import Enum

import typer


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


InventoryOpt = Annotated[Path, typer.Option(
    "-i", "--inventory", metavar="INV", help="Inventory YAML (see inventories/sample.yaml).",
    dir_okay=False)]
OutputOpt = Annotated[OutputFormat, typer.Option(
    "--output", "-O", help="text (tables for people) or json (for scripts).")]
OutputDirOpt = Annotated[Path, typer.Option(
    "-o", "--out", metavar="DIR", help="Directory for the rendered tree (created if missing).",
    file_okay=False)]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace DIR even if deployctl did not write it.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks (also DEPLOYCTL_DEBUG=1).")]
FactsOpt = Annotated[Optional[Path], typer.Option(
    "--facts", metavar="FILE", help="facts.json from `deployctl preflight`: fills device IPs and SDIDs the "
    "inventory leaves out.", dir_okay=False)]


class Target(str, Enum):
    bare_metal = "bare-metal"
    helm = "helm"


class DeployTarget(str, Enum):
    hosts = "hosts"
    k8s = "k8s"


TargetOpt = Annotated[Target, typer.Option(
    "--target", "-t", help="bare-metal: per-node files for docker on the hosts; helm: values.yaml for the "
    "mindie Helm chart, the chart, and the manifests helm renders from them.")]
DeployTargetOpt = Annotated[DeployTarget, typer.Option(
    "--target", "-t", help="hosts: the servers over SSH/Ansible; k8s: the Helm release in the inventory's "
    "kubernetes.namespace (kubeconfig from kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config).")]
