"""Where `deployctl watch` sends a vLLM-Ascend instance its one-token completion, to tell an engine that answers
/health but cannot infer (docs/watch.md). The request is MindIE-Motor's virtual inference's (MM = Ascend/MindIE-Motor:
motor/node_manager/core/services/native_engine/virtual_inference/requesters.py@6250476a VllmCompletionsRequester:
POST /v1/completions {"model": <served name>, "prompt": "1", "max_tokens": 1}, header X-Request-Id
"<µs>_virtual"), sent to the instance's own API server of DP rank 0, as Motor binds its probe to DP rank 0 only
(MM docs/zh/user_guide/features/sim_inference.md@173c896e), from the instance's master node, whose port it is.

Prefill/decode: the Mooncake connectors act on a request only when it carries kv_transfer_params (do_remote_decode on
the prefill side, do_remote_prefill on the decode side); without them a prefill or a decode server computes the
request itself. So Motor sends the prefill role and a decode role fed after the prefill ("handoff": the
MooncakeConnectorV1 and MooncakeHybridConnector deployctl renders) the same plain completion (sim_inference.md: the
handoff decode and the prefill and union roles are sent a plain completion), and so does deployctl. A decode fed
layer by layer during the prefill (MooncakeLayerwiseConnector) is sent a marked request instead
(kv_transfer_params.do_virtual, requesters.py VllmCompletionsRequester.send) whose handling in vLLM-Ascend deployctl
has not verified: such a decode instance is not probed, and the watch says so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from deployctl.core.engine_spec.protocol import InferProbe

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan

LAYERWISE = "MooncakeLayerwiseConnector"


def infer_probe(plan: Plan, instance: str) -> InferProbe | str:
    from deployctl.core.engines.vllm_ascend.launch import connector_of, node_launch
    from deployctl.core.input.roles import for_role

    inst = plan.instance(instance)
    if inst.role == "decode" and connector_of(plan) == LAYERWISE:
        return (f"a decode instance fed layer by layer ({LAYERWISE}) needs its prefill's KV cache for any request; "
                "the marked request the upstream probe sends it is unverified, so deployctl sends none")
    ends = node_launch(plan, inst.master).endpoints
    if not ends:
        return f"its master {inst.master} serves no API to send a request to"
    host, port = ends[0]        # DP rank 0's API server (external DP: one per rank, rank 0 first)
    body = json.dumps({"model": for_role(plan.inventory, inst.role).model.served_name, "prompt": "1",
                       "max_tokens": 1})
    return InferProbe(node=inst.master, url=f"http://{host}:{port}/v1/completions", body=body)
