"""The image-to-host pairing rule: the CANN, torch_npu and engine versions inside the engine image against the host's
driver (HDK), judged per host, before an engine starts and times out in HCCL.

Two sources, each named in the finding:

* the version files themselves: CANN's ``ascend_toolkit_install.info`` and the driver's ``version.info`` each list the
  inner codes of the other they work with (``compatible_version``); neither listing the other is a FAIL
  (``versions.cann_fits_driver``);
* the releases that publish a strict pairing (pairing.yaml, each entry with its source): an image of such a release
  on a host whose driver, or with a CANN / torch_npu, other than the release names is a FAIL too: the release says
  not to mix them.
"""

from __future__ import annotations

from functools import lru_cache

from deployctl.core.models.facts import ImageVersions
from deployctl.core.models.host_facts import Finding, HostFacts
from deployctl.probes import versions

RULE = "image-pairing"


@lru_cache(maxsize=1)
def releases() -> tuple[dict, ...]:
    """pairing.yaml's releases (packaged data, read once)."""
    from deployctl.core.packaged import packaged_yaml

    return tuple(packaged_yaml("deployctl.features.preflight", "pairing.yaml")["releases"])


def _f(severity: str, message: str, hint: str, host: str) -> Finding:
    return Finding(rule=RULE, severity=severity, host=host, message=message, hint=hint)


def _said(iv: ImageVersions) -> str:
    parts = [f"CANN {iv.cann.version}" + (f" ({iv.cann.innerversion})" if iv.cann.innerversion else "")] \
        if iv.cann else []
    parts += [f"{name} {v}" for name, v in sorted(iv.packages.items())]
    return ", ".join(parts) or "no version files"


def _driver(h: HostFacts) -> str:
    d = h.driver
    return f"driver {d.package}" + (f" ({d.innerversion})" if d and d.innerversion else "") if d else "driver ?"


def _declared(image: str, h: HostFacts, iv: ImageVersions):
    """The version files' own word: CANN and driver list the inner codes of the other they work with."""
    if iv.cann is None or h.driver is None:
        return
    try:
        fits = versions.cann_fits_driver(h.driver, iv.cann)
    except ValueError as exc:
        yield _f("WARN", f"image {image} ({_said(iv)}): cannot pair its CANN with {_driver(h)}: {exc}", "", h.name)
        return
    if not fits:
        listed = ", ".join(lo if lo == hi else f"{lo}-{hi}" for lo, hi in iv.cann.compatible_version) or "none"
        yield _f("FAIL", f"image {image} ships CANN {iv.cann.version} ({iv.cann.innerversion}), which lists drivers "
                 f"{listed}; {_driver(h)} is not among them and does not list that CANN either",
                 f"install the HDK (driver + firmware) CANN {iv.cann.version} names in its release notes on this node, "
                 f"or use an image built on a CANN that driver {h.driver.package if h.driver else '?'} lists",
                 h.name)


def _public(version: str | None) -> str:
    """A version without its local suffix (``2.9.0.post1+git4c901a4`` -> ``2.9.0.post1``), lower-case."""
    return (version or "").split("+", 1)[0].lower()


def _matches(release: dict, iv: ImageVersions) -> bool:
    return all(_public(iv.packages.get(name)) == _public(str(value)) for name, value in release["when"].items())


def _published(image: str, h: HostFacts, iv: ImageVersions):
    """The releases that publish a strict pairing: what the image is, against what the release names."""
    for rel in releases():
        if not _matches(rel, iv):
            continue
        want, src = rel["pairs"], rel["source"]
        wrong = []
        canns = want.get("cann", [])
        canns = [canns] if isinstance(canns, str) else list(canns)
        if canns and iv.cann is not None and _public(iv.cann.version) not in {_public(c) for c in canns}:
            wrong.append(f"CANN {iv.cann.version} (the release pairs CANN {' or '.join(canns)})")
        if "torch_npu" in want and "torch_npu" in iv.packages and \
                _public(iv.packages["torch_npu"]) != _public(str(want["torch_npu"])):
            wrong.append(f"torch_npu {iv.packages['torch_npu']} (the release pairs {want['torch_npu']})")
        hdk = str(want.get("hdk", ""))
        if hdk and h.driver is not None and not h.driver.package.lower().startswith(hdk.lower()):
            wrong.append(f"{_driver(h)} (the release pairs HDK {hdk})")
        if wrong:
            how = "pairs only with" if rel["severity"] == "FAIL" else "is built and tested with"
            yield _f(rel["severity"], f"image {image} is {rel['name']}, which {how} its own versions ({src}); "
                     f"here: {'; '.join(wrong)}",
                     f"install HDK {hdk} (driver + firmware) on this node" if hdk and any("HDK" in w for w in wrong)
                     else "use the release's own image, unmodified", h.name)


def check_image_pairing(inv, facts: dict[str, HostFacts]):
    image = inv.engine.image
    for h in facts.values():
        if not h.reachable or h.image_present is False:
            continue
        iv = h.image_versions
        if iv is None:
            why = h.probe_errors.get("image.versions")
            if why and h.image_present:
                yield _f("WARN", f"could not read the versions inside image {image}: {why}",
                         "the image's CANN and torch_npu are then not paired with this node's driver", h.name)
            continue
        if not iv.present:
            continue
        if iv.cann is None:
            yield _f("WARN", f"image {image} has no CANN toolkit install file where CANN puts it "
                     "(/usr/local/Ascend/ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info)",
                     "its CANN cannot be paired with this node's driver: check the image's release notes", h.name)
        yield from _declared(image, h, iv)
        yield from _published(image, h, iv)
