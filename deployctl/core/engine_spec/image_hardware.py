"""An engine image built for other Atlas hardware than the cluster's (an A2 image on `hardware: a3`, or the
reverse) is refused at engine.image's line, before the hour-long HCCL timeout it ends in. Each engine reads its own
publisher's tags (deployctl/core/engines/<kind>/images.py); an image whose tag says nothing (a private build, a
digest) is not judged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.inventory import Inventory

NAMES = {"a2": "Atlas A2", "a3": "Atlas A3", "310p": "Atlas 300I DUO", "950dt": "Atlas 950DT"}


def image_tag(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference; tag '' when there is none (a digest says nothing)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return name, ""
    repo, tag = name.rsplit(":", 1)
    return repo, tag


def image_problems(inv: Inventory, raw: RawInventory, hardware_of: Callable[[str], str | None]) -> list[Problem]:
    """engine.image built for other hardware than cluster.hardware (``hardware_of``: the engine's reading of its
    tags), at engine.image's line."""
    built = hardware_of(inv.engine.image)
    if built is None or built == inv.cluster.hardware:
        return []
    return [raw.problem(("engine", "image"), f"{inv.engine.image} is built for {NAMES.get(built, built)}, but "
                        f"cluster.hardware is {inv.cluster.hardware} ({NAMES[inv.cluster.hardware]})",
                        f"use the {NAMES[inv.cluster.hardware]} image of the same release, or correct "
                        "cluster.hardware: the kernels of one do not run on the other")]
