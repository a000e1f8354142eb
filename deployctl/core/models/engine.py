"""What every engine's inventory block has in common (spec/inventory.md §engine).

Each engine's settings model extends ``EngineBase`` with its own keys (deployctl/core/models/engine_settings/<kind>.py); the
inventory's ``engine`` block is the union of those models, discriminated on ``engine.kind``.
"""

from __future__ import annotations

from pydantic import Field

from deployctl.core.models.base import Strict

PATH = r"^/[A-Za-z0-9._/-]*$"


class Mount(Strict):
    """engine.mounts[]: a host directory or file bind-mounted into the engine container."""

    host: str = Field(min_length=1, description="The directory or file on every host.")
    container: str = Field(min_length=1, description="Where it appears inside the engine container.")
    rw: bool = Field(False, description="Mount it read-write (read-only unless asked).")


class EngineBase(Strict):
    kind: str = Field(description="Which engine renders and runs it (`deployctl engines` lists them).")
    image: str = Field(min_length=1, description="The engine's container image.")
    version: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+(\.[0-9A-Za-z]+)*$", description=(
        "The engine version the support matrix is checked against (e.g. \"2.2\"); default: read from the "
        "image tag (2.2.RC1-... -> 2.2)."))
    env: dict[str, str | int | float | bool] = Field(default_factory=dict, description=(
        "KEY: VALUE written last into every node's env file, over the presets (e.g. NPU_MEMORY_FRACTION, "
        "HCCL_BUFFSIZE: the plan's memory fit uses them). Values whose names say they are secret (HF_TOKEN, "
        "*_KEY, *_TOKEN, *PASSWORD*, *SECRET*) are masked outside the hosts' env files."))
    secret_env: list[str] = Field(default_factory=list, max_length=256, description=(
        "Names of env variables (engine.env, layout.<role>.env) whose values are secret although their names do "
        "not say so (HF_TOKEN, *_KEY, *_TOKEN, *PASSWORD*, *SECRET* already are). A secret value is written "
        "only to each host's env file (mode 0600) and, on Kubernetes, to a Secret the pods read with envFrom; "
        "plan.json, `plan --output json`, run records, diffs and values.yaml show *** instead."))
    shm_size: str = Field("500g", pattern=r"^[1-9][0-9]*[kmgKMG]?$", description=(
        "docker --shm-size (HCCL needs a large /dev/shm)."))
    container_name: str | None = Field(None, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$", max_length=64,
                                       description=(
        "The engine container is deployctl_<cluster.name>_<this>, always per cluster; default: the engine's "
        "kind."))
    work_dir: str = Field("/etc/deployctl", pattern=PATH, description=(
        "Where the rendered files (config, env, rank table) appear inside the container."))
    deploy_dir: str = Field("/var/lib/deployctl", pattern=PATH, description=(
        "On each host: <deploy_dir>/<cluster>/revisions/<id>/ holds the files of every deployed revision; "
        "<cluster>/current and <cluster>/previous point at the running one and the one before."))
    privileged: bool = Field(False, description="docker --privileged (the explicit --device list is enough).")
    mounts: list[Mount] = Field(default_factory=list, max_length=64, description=(
        "Extra bind mounts into the engine container (read-only unless rw: true), e.g. patched operators."))
    device_logs: bool = Field(True, description=(
        "Mount the host's device log directories (/var/log/npu/slog, plog) so logs survive `docker rm`."))
    run_as_uid: int | None = Field(None, ge=0, le=2**31 - 1, description=(
        "The uid the engine runs as in its container (docker --user); the files it reads are chowned to it. "
        "Default: the image's user."))

