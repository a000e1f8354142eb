"""Where MindIE lives in its image and how its processes start, per version (support.yaml `versions.<v>.layout`).

Two layouts exist:

* **run package** (2.1-2.3): ``/usr/local/Ascend/mindie/latest/mindie-service`` holds ``bin/mindieservice_daemon``
  (started from its service directory) and MindIE-MS's ``bin/ms_controller`` / ``bin/ms_coordinator``; the
  coordinator takes ``<predict_ip> <predict_port> <manage_ip> <manage_port>`` (Motor 7be35ef boot.sh L203, L232;
  coordinator/main.cpp L21-55).
* **wheel** (3.0, and 3.1 by its docs): ``mindie_llm_server`` (MindIE-LLM v3.0.0 setup.py L129-134) execs
  ``site-packages/mindie_llm/bin/mindieservice_daemon`` with the arguments passed through and sets
  MINDIE_LLM_HOME_PATH (mindie_llm/server/main.py L43-90); Motor boot.sh starts it as
  ``mindie_llm_server --config-file "$CONFIG_DIR/config.json"`` (Motor 5dfb024 boot.sh L160) and a distributed
  DP server as ``mindie_llm_server --config-file <cfg> --expert-parallel true`` (llm_daemon_starter.py L38-47).
  MindIE-MS is the ``mindie_motor`` wheel: ``mindie_motor_controller`` (no arguments) and
  ``mindie_motor_coordinator <predict_ip> <manage_ip>`` with the ports in ms_coordinator.json; more than two
  arguments are refused since Motor v3.0.0.beta.2 (coordinator/main.cpp L22-45; boot.sh L225 at 5dfb024). The
  guides source ``site-packages/mindie_llm/set_env.sh`` first (deepseek_v3.2.md L121; Motor boot.sh L13).

The server path can be overridden with ``engine.daemon`` (a custom image); the rest follows the layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.container import source_set_env

if TYPE_CHECKING:
    from deployctl.core.models.engine_settings.mindie import MindieSettings

SERVICE = "/usr/local/Ascend/mindie/latest/mindie-service"
SITE = "/usr/local/lib/python3.11/site-packages"    # Motor mindie_env_a3.json L5-6 (3.0); deepseek_v3.2.md L154
TOOLKIT_SET_ENV = ("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh")


@dataclass(frozen=True)
class Install:
    name: str                    # "run-package" | "wheel"
    server: str                  # the server binary engine.daemon defaults to
    ms_home: str                 # MindIE-MS's install dir (engine.ms_home's default)
    set_env: tuple[str, ...]     # sourced in this order when present; deployctl's env is put back after
    launcher: str                # bash -c of one server: $DEPLOYCTL_DAEMON, $MIES_CONFIG_JSON_PATH from the env
    dp_launcher: str             # bash -c of a distributed-decode node: one server per DP rank
    ms_launchers: tuple[tuple[str, str], ...]    # (role, bash -c) of MindIE-MS's controller and coordinator


def _dp(prefix: str) -> str:
    # the container lives while all of them do and stops with the first that exits.
    # CPU binding (A3 decode, DEPLOYCTL_DP_CPU_SLICES = the server's NPU count): DP server i runs on CPU slice i of
    # that many, less its last 2 cores, as MindIE-Motor's node_manager does (taskset -c: llm_daemon_starter.py
    # L38-43, L132-134; get_cores_a3 in node_manager/common/mindie_cpu_binding.py L107-118, os.cpu_count() = all
    # online CPUs); A2's binding reads each NPU's NUMA node (get_cores_a2 L121-138) and is not rendered
    return prefix + (
        'pids=() && for i in $(seq 1 "$DEPLOYCTL_DP_SERVERS"); do bind=(); '
        'if [ -n "${DEPLOYCTL_DP_CPU_SLICES:-}" ]; then per=$(( $(getconf _NPROCESSORS_ONLN) / DEPLOYCTL_DP_CPU_SLICES )); '
        'if [ "$per" -ge 3 ]; then bind=(taskset -c "$(( (i - 1) * per ))-$(( i * per - 3 ))"); fi; fi; '
        '"${bind[@]}" "$DEPLOYCTL_DAEMON" --config-file "$DEPLOYCTL_WORK/config$i.json" --expert-parallel true & '
        'pids+=($!); done; wait -n; rc=$?; kill "${pids[@]}" 2>/dev/null; wait; exit "$rc"')


_RUN_SET_ENV = source_set_env(TOOLKIT_SET_ENV + ("/usr/local/Ascend/atb-models/set_env.sh",
                                                 "/usr/local/Ascend/mindie/set_env.sh"))
# MindIE-MS needs MindIE's libraries: Motor boot.sh (7be35ef) L27 LD_LIBRARY_PATH with mindie-llm/lib(/grpc)
# and mindie-service/lib(/grpc), L39 HSECEASY_PATH=mindie-service/lib; coordinator.md L315, L321
_RUN_MS_ENV = (_RUN_SET_ENV + 'LLM="$(dirname "$DEPLOYCTL_MS_HOME")/mindie-llm"; '
               'export LD_LIBRARY_PATH="$LLM/lib:$LLM/lib/grpc:$DEPLOYCTL_MS_HOME/lib:$DEPLOYCTL_MS_HOME/lib/grpc'
               '${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; export HSECEASY_PATH="$DEPLOYCTL_MS_HOME/lib"; '
               'cd "$DEPLOYCTL_MS_HOME" && ')
RUN_PACKAGE = Install(
    name="run-package", server=f"{SERVICE}/bin/mindieservice_daemon", ms_home=SERVICE,
    set_env=TOOLKIT_SET_ENV + ("/usr/local/Ascend/atb-models/set_env.sh", "/usr/local/Ascend/mindie/set_env.sh"),
    launcher=_RUN_SET_ENV + 'cd "$(dirname "$DEPLOYCTL_DAEMON")/.." && exec "$DEPLOYCTL_DAEMON"',
    dp_launcher=_dp(_RUN_SET_ENV + 'cd "$(dirname "$DEPLOYCTL_DAEMON")/.." && '),
    ms_launchers=(("controller", _RUN_MS_ENV + 'exec ./bin/ms_controller'),
                  ("coordinator", _RUN_MS_ENV + 'exec ./bin/ms_coordinator "$DEPLOYCTL_MS_IP" "$DEPLOYCTL_MS_PORT" '
                                                '"$DEPLOYCTL_MS_IP" "$DEPLOYCTL_MS_MANAGE_PORT"')))

_WHEEL_SET_ENV = source_set_env(TOOLKIT_SET_ENV + (f"{SITE}/mindie_llm/set_env.sh",))
# the wrappers set MIES_INSTALL_PATH and LD_LIBRARY_PATH (Motor coordinator_run.py L17-39); KMC's library path
# (HSECEASY_PATH, needed with TLS or file logging: coordinator.md L301, controller.md L623-627) is the package's
# lib as in the run package (unverified for the wheel: no 3.0 source sets it)
_WHEEL_MS_ENV = _WHEEL_SET_ENV + 'export HSECEASY_PATH="$DEPLOYCTL_MS_HOME/lib"; '

WHEEL = Install(
    name="wheel", server="/usr/local/bin/mindie_llm_server", ms_home=f"{SITE}/mindie_motor",
    set_env=TOOLKIT_SET_ENV + (f"{SITE}/mindie_llm/set_env.sh",),
    launcher=_WHEEL_SET_ENV + 'exec "$DEPLOYCTL_DAEMON" --config-file "$MIES_CONFIG_JSON_PATH"',
    dp_launcher=_dp(_WHEEL_SET_ENV),
    ms_launchers=(("controller", _WHEEL_MS_ENV + 'exec mindie_motor_controller'),
                  ("coordinator", _WHEEL_MS_ENV + 'exec mindie_motor_coordinator "$DEPLOYCTL_MS_IP" '
                                                  '"$DEPLOYCTL_MS_IP"')))

LAYOUTS = {"2.2": RUN_PACKAGE, "3.0": WHEEL}


def install(engine: MindieSettings) -> Install:
    """The layout of the engine's version (engine.version or the image tag; support.yaml `versions.<v>.layout`).
    A version the matrix does not list gets the layout of its major version (3.x and later: the wheel);
    an image whose tag names no version keeps the run package (support.py warns that it is unverified)."""
    from deployctl.core.engine_spec.protocol import version_from
    from deployctl.core.engines.mindie.support import matrix

    version = version_from(engine).version
    row = matrix()["versions"].get(version or "")
    if row:
        return LAYOUTS[row["layout"]]
    major = version.split(".", 1)[0] if version else ""
    return WHEEL if major.isdigit() and int(major) >= 3 else RUN_PACKAGE


def server(engine: MindieSettings) -> str:
    """The server binary: engine.daemon when the inventory names one, else the version's."""
    return engine.daemon or install(engine).server


def ms_home(engine: MindieSettings) -> str:
    return engine.ms_home or install(engine).ms_home
