"""`deployctl render --target helm`: values.yaml for the plan, the chart it is for, and `helm template` output.

Tree::

    DIR/plan.json          the plan (as for bare metal)
    DIR/values.yaml        chart values: instances, files, env, nodes, NPUs, ports (secret env: names only)
    DIR/secret-values.yaml the secret env values (mode 0600; only when the inventory has secret env variables)
    DIR/chart/             the chart these values are for (deployctl/charts/ascend-llm)
    DIR/manifests.yaml     `helm template <release> DIR/chart -n <namespace> -f DIR/values.yaml
                           [-f DIR/secret-values.yaml]`, the Secret's data masked (***)

Secret env variables (deployctl.core.input.secrets) go into a Secret the pods read with envFrom. A Helm user installs
with both files: `helm upgrade --install R DIR/chart -f DIR/values.yaml -f DIR/secret-values.yaml`;
or sets `secretEnv.existingSecret` (kubernetes.values) to a Secret they manage and leaves the second file out.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from deployctl import __version__
from deployctl.core.models.artifact import Artifact
from deployctl.core.render.chart_values import CHART_NAME, chart_values
from deployctl.core.models.plan import Plan


# Always written out, even when equal to the chart's defaults: what a reviewer checks first.
ALWAYS_SHOWN = ("engine", "image", "npu", "shmSize", "weightsPath")


def values_yaml(plan: Plan, values) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    k = plan.inventory.kubernetes
    release = plan.inventory.helm_release
    header = (f"# deployctl {__version__}: values of chart {CHART_NAME} ({plan.engine.kind}) for cluster {plan.inventory.cluster.name} "
              f"({plan.preset}, {len(plan.nodes)} x {plan.hardware.upper()}).\n"
              "# Do not edit by hand: change the inventory and re-render.\n"
              f"# Install: helm upgrade --install {release} chart --namespace {k.namespace} --values values.yaml"
              + (" --values secret-values.yaml" if values.secretEnv.keys else "") + "\n"
              "#   (or: deployctl up --target k8s, which also restarts the instances that changed)\n")
    full = values.model_dump()
    changed = values.model_dump(exclude_defaults=True)
    always = ALWAYS_SHOWN + (plan.engine_spec.chart.block,)
    shown = {k: v for k, v in full.items() if k in always or k in changed}
    # an instance shows what its engine sets (MindIE: env and files; vLLM-Ascend: pods)
    shown["instances"] = [i.model_dump(exclude_defaults=True) for i in values.instances]
    if "secretEnv" in shown:          # the names only: the values go to secret-values.yaml (0600)
        shown["secretEnv"] = {k: v for k, v in shown["secretEnv"].items() if k != "values"}
    body = yaml.dump(shown, Dumper=Dumper, sort_keys=False, width=10_000, allow_unicode=True)
    return header + body


def chart_artifacts(name: str) -> list[Artifact]:
    from deployctl.io.helm import chart_dir

    root = chart_dir(name)
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        mode = 0o755 if path.suffix == ".sh" else 0o644
        out.append(Artifact(kind="chart", path=f"chart/{path.relative_to(root).as_posix()}",
                            content=path.read_bytes(), mode=mode))
    return out


def secret_values_yaml(values) -> str | None:
    """secret-values.yaml: the secret env values (None when there are none). Keep it private (0600)."""
    import yaml

    if not values.secretEnv.keys:
        return None
    header = ("# deployctl: the secret env values of this release. Readable by you only (mode 0600): do not commit\n"
              "# it. Pass it after values.yaml: helm upgrade --install ... --values values.yaml --values secret-values.yaml\n")
    return header + yaml.safe_dump({"secretEnv": {"values": dict(values.secretEnv.values)}}, sort_keys=True,
                                   width=10_000, allow_unicode=True)


def manifests(plan: Plan, values_text: str, secret_text: str | None = None) -> str:
    from deployctl.io import helm

    k = plan.inventory.kubernetes
    with tempfile.TemporaryDirectory(prefix="deployctl-helm-") as tmp:   # 0700: the secret values stay private
        values_file = Path(tmp) / "values.yaml"
        values_file.write_text(values_text, encoding="utf-8")
        extra = ()
        if secret_text:
            extra = (Path(tmp) / "secret-values.yaml",)
            extra[0].write_text(secret_text, encoding="utf-8")
        chart = helm.chart_dir(CHART_NAME)
        return helm.template(chart, values_file, plan.inventory.helm_release, k.namespace, extra=extra)


def mask_manifests(text: str | None) -> str:
    """Manifests with every value of a Secret's data/stringData replaced by *** (for files, never for helm)."""
    import base64

    import yaml

    from deployctl.core.input.secrets import MASK

    if not text or "kind: Secret" not in text:
        return text or ""
    out = []
    for doc in text.split("\n---"):
        try:
            body = yaml.safe_load(doc)
        except yaml.YAMLError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Secret":
            for field, mask in (("data", base64.b64encode(MASK.encode()).decode()), ("stringData", MASK)):
                if isinstance(body.get(field), dict):
                    body[field] = {k: mask for k in body[field]}
            head = doc[:len(doc) - len(doc.lstrip("\n"))]
            comments = "".join(line + "\n" for line in doc.lstrip("\n").splitlines() if line.startswith("#"))
            doc = head + comments + yaml.safe_dump(body, sort_keys=False).rstrip("\n")
        out.append(doc)
    return "\n---".join(out)


@dataclass(frozen=True)
class Release:
    """What the chart gets for a plan: the values (model and values.yaml text) and, when asked, the manifests."""

    values: object                       # the chart's values (k8s.chart_values.values_model())
    values_text: str
    manifests: str | None                # as helm renders them (the Secret's data in clear: never write it)
    secret_text: str | None = None       # secret-values.yaml (private), None without secret env

    @property
    def manifests_masked(self) -> str:
        """The manifests to write to a file: the Secret's values masked."""
        return mask_manifests(self.manifests)


def render_release(plan: Plan, with_manifests: bool = True) -> Release:
    from deployctl.core.render import render_artifacts

    values = chart_values(plan, render_artifacts(plan))
    text = values_yaml(plan, values)
    secret = secret_values_yaml(values)
    return Release(values, text, manifests(plan, text, secret) if with_manifests else None, secret)


def render_helm(plan: Plan, with_manifests: bool = True) -> list[Artifact]:
    from deployctl.core.render import render_plan

    release = render_release(plan, with_manifests)
    out = render_plan(plan) + [Artifact(kind="values", path="values.yaml", content=release.values_text.encode())]
    if release.secret_text is not None:
        out.append(Artifact(kind="values", path="secret-values.yaml", content=release.secret_text.encode(),
                            mode=0o600))
    out += chart_artifacts(CHART_NAME)
    if release.manifests is not None:
        out.append(Artifact(kind="manifests", path="manifests.yaml", content=release.manifests_masked.encode()))
    return sorted(out, key=lambda a: a.path)
