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
    "-i", "--inventory", metavar="INV", help="Inventory YAML (`deployctl init` writes a commented sample).",
    dir_okay=False)]
OutputOpt = Annotated[OutputFormat, typer.Option(
    "--output", "-O", help="text (tables for people) or json (for scripts).")]
OutputDirOpt = Annotated[Path, typer.Option(
    "-o", "--out", metavar="DIR", help="Directory for the rendered tree (created if missing).",
    file_okay=False)]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace DIR even if deployctl did not write it.")]
MaxOutputOpt = Annotated[Optional[float], typer.Option(
    "--max-output-mb", min=0.001, metavar="MB", help="Stop reading a command on a host once it printed this much "
    "(stdout + stderr) and report that host (default DEPLOYCTL_MAX_OUTPUT_MB, else 4).")]
FanOutOpt = Annotated[Optional[int], typer.Option(
    "--fan-out", min=1, max=1024, metavar="N", help="Hosts every fleet command (preflight, status, up, watch, logs, "
    "weights, ...) contacts at once: one thread and one SSH handshake each (default DEPLOYCTL_FAN_OUT, else 64). "
    "Lower it for a small controller; 1,024 hosts take 16 waves of 64.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks (also DEPLOYCTL_DEBUG=1).")]
FactsOpt = Annotated[Optional[Path], typer.Option(
    "--facts", metavar="FILE", help="facts.json from `deployctl preflight`: fills device IPs and SDIDs the "
    "inventory leaves out (default: those of this inventory's latest successful preflight run under --run-dir).",
    dir_okay=False)]


# One spelling of --target everywhere: hosts | k8s. render's old names (bare-metal | helm) and their use on the
# deploy commands still work: each command's callback turns either spelling into the member it expects
# (render: Target.bare_metal / Target.helm; up, down, status, diff: DeployTarget.hosts / DeployTarget.k8s).

class Target(str, Enum):
    """render --target. Callers get bare_metal or helm (their values go to run_render)."""

    hosts = "hosts"             # canonical spelling, normalised to bare_metal
    k8s = "k8s"                 # canonical spelling, normalised to helm
    lws = "lws"                 # helm with kubernetes.workload lws (workload_of)
    infer_operator = "infer-operator"     # helm with kubernetes.workload infer-operator
    bare_metal = "bare-metal"
    helm = "helm"


class Strategy(str, Enum):
    rolling = "rolling"
    recreate = "recreate"


class DeployTarget(str, Enum):
    """up/down/status/diff --target. Callers get hosts or k8s (their values go to run_diff)."""

    hosts = "hosts"
    k8s = "k8s"
    lws = "lws"                 # k8s with kubernetes.workload lws (workload_of)
    infer_operator = "infer-operator"     # k8s with kubernetes.workload infer-operator
    bare_metal = "bare-metal"   # render's old name, normalised to hosts
    helm = "helm"               # render's old name, normalised to k8s


K8S_TARGETS = (DeployTarget.k8s, DeployTarget.lws, DeployTarget.infer_operator)


def workload_of(target) -> str | None:
    """The kubernetes.workload a --target sets over the inventory's (lws, infer-operator), None for the
    inventory's own (k8s)."""
    value = getattr(target, "value", target)
    return value if value in ("lws", "infer-operator") else None


def _render_target(value: Target) -> Target:
    return {Target.hosts: Target.bare_metal, Target.k8s: Target.helm}.get(value, value)


def _deploy_target(value: DeployTarget) -> DeployTarget:
    return {DeployTarget.bare_metal: DeployTarget.hosts, DeployTarget.helm: DeployTarget.k8s}.get(value, value)


_TARGET_NAMES = "(bare-metal and helm are the old names of hosts and k8s and still work)"

TargetOpt = Annotated[Target, typer.Option(
    "--target", "-t", callback=_render_target, show_default="hosts",
    help="hosts: per-node files for docker on the servers; k8s: values.yaml for the engine's Helm chart, the "
    "chart, and the manifests helm renders from them; lws: the same with a LeaderWorkerSet per instance; "
    f"infer-operator: with MindCluster's InferServiceSet (kubernetes.workload) {_TARGET_NAMES}.")]
DeployTargetOpt = Annotated[DeployTarget, typer.Option(
    "--target", "-t", callback=_deploy_target, show_default="hosts",
    help="hosts: the servers over SSH/Ansible; k8s: the Helm release in the inventory's kubernetes.namespace "
    "(kubeconfig from kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config); lws: the same release with a "
    "LeaderWorkerSet per instance (the LWS controller must run); infer-operator: with one InferServiceSet "
    f"(MindCluster's Infer Operator must run) (kubernetes.workload) {_TARGET_NAMES}.")]


def _allow_exec(value: bool) -> bool:
    if value:
        from deployctl.io.kube import allow_kubeconfig_exec

        allow_kubeconfig_exec()
    return value


AllowExecOpt = Annotated[bool, typer.Option(
    "--allow-kubeconfig-exec", callback=_allow_exec,
    help="k8s: let the inventory's kubeconfig (kubernetes.kubeconfig) run its credential plugin (users with "
    "`exec` or `auth-provider`); refused otherwise. Also DEPLOYCTL_ALLOW_KUBECONFIG_EXEC=1.")]


# plan and recommend
InputLenOpt = Annotated[Optional[int], typer.Option(
    "--input-len", "--input", min=1, metavar="TOKENS", help="Input tokens per request (default: model.max_input_len).")]
OutputLenOpt = Annotated[Optional[int], typer.Option(
    "--output-len", min=1, metavar="TOKENS",
    help="Output tokens per request (default: model.max_seq_len - model.max_input_len).")]
RequestRateOpt = Annotated[Optional[float], typer.Option(
    "--request-rate", min=0.0001, metavar="REQ/S",
    help="Estimate an open loop: requests per second arriving (with --concurrency as a ceiling), instead of "
         "clients sending back to back.")]


class Arrival(str, Enum):
    poisson = "poisson"
    fixed = "fixed"


ArrivalOpt = Annotated[Arrival, typer.Option(
    "--arrival", help="With --request-rate: poisson (exponential gaps, the benchmarks' default) or fixed (equal "
                      "gaps).")]
PrefixHitOpt = Annotated[Optional[float], typer.Option(
    "--prefix-hit", min=0.0, max=0.99, metavar="SHARE",
    help="Share of each prompt the engine finds in its prefix cache (0-0.99; e.g. the hit rate the engine's "
         "metrics report): not computed again.")]
SharedPrefixOpt = Annotated[Optional[int], typer.Option(
    "--shared-prefix", min=1, metavar="TOKENS",
    help="Prompts share their first TOKENS tokens (a system prompt): the prefix hit rate is TOKENS / input "
         "length.")]
SkuOpt = Annotated[Optional[str], typer.Option(
    "--sku", metavar="SKU", help="NPU SKU for the estimate, e.g. 910B3, 910B4, 800I-A3 (default: cluster.sku, "
                                 "preflight's npu-smi chip name with --facts, else the hardware's default).")]

# the commands that act on a deployment
RunDirOpt = Annotated[Path, typer.Option("--run-dir", help="Where run records are written (relative to the "
                                                           "current directory).")]
BreakLockOpt = Annotated[bool, typer.Option(
    "--break-lock", help="Remove a deployment lock left by a killed run (shows its holder and asks first; "
                         "-y skips the question).")]
ReadyTimeoutOpt = Annotated[int, typer.Option(help="Seconds each node may take to become ready.", min=1)]
