"""What every engine's inventory block has in common (spec/inventory.md §engine).

Each engine driver extends ``EngineBase`` with its own keys (deployctl/engines/<kind>/settings.py); the
inventory's ``engine`` block is the union of those models, discriminated on ``engine.kind``.
"""

from __future__ import annotations

from pydantic import Field

from deployctl.models.base import Strict

PATH = r"^/[A-Za-z0-9._/-]*$"


class Mount(Strict):
    """engine.mounts[]: a host directory or file bind-mounted into the engine container."""

    host: str = Field(min_length=1)
    container: str = Field(min_length=1)
    rw: bool = False      # read-only unless asked


class EngineBase(Strict):
    kind: str
    image: str = Field(min_length=1)
    version: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+(\.[0-9A-Za-z]+)*$")
    # the engine version the support matrix is keyed by; default: read from the image tag
    env: dict[str, str | int | float | bool] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list, max_length=256, description=(
        "Names of env variables (engine.env, layout.<role>.env) whose values are secret although their names do "
        "not say so (HF_TOKEN, *_KEY, *_TOKEN, *PASSWORD*, *SECRET* already are). A secret value is written "
        "only to each host's env file (mode 0600) and, on Kubernetes, to a Secret the pods read with envFrom; "
        "plan.json, `plan --output json`, run records, diffs and values.yaml show *** instead."))
    shm_size: str = Field("500g", pattern=r"^[1-9][0-9]*[kmgKMG]?$")
    container_name: str | None = Field(None, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$", max_length=64)
    # the engine container is deployctl_<cluster>_<this> (default: the engine's kind): always per cluster
    work_dir: str = Field("/etc/deployctl", pattern=PATH)  # rendered files inside the container
    deploy_dir: str = Field("/var/lib/deployctl", pattern=PATH)
    # on each host: <deploy_dir>/<cluster>/revisions/<id>/ holds the files of every deployed revision,
    # <cluster>/current and <cluster>/previous point at the running one and the one before
    privileged: bool = False     # docker --privileged (the explicit --device list is enough)
    mounts: list[Mount] = Field(default_factory=list, max_length=64)
    device_logs: bool = True
    # mount the host's device log directories (/var/log/npu/slog, plog) so logs survive `docker rm`
    run_as_uid: int | None = Field(None, ge=0, le=2**31 - 1)
    # the uid the engine runs as in its container; the files it reads are chowned to it by start.sh

