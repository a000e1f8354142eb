"""What one instance of each role sustains, the yardstick of the utilisation signal: the plan's performance
estimate (or the estimate under the user's calibration, when the caller made it with one): a decoding instance's
share of the deployment's output tokens per second at the estimate's workload, a prefill instance's prompt tokens
per second at full batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.sizing.estimate_types import PlanEstimate


def per_instance(est: PlanEstimate) -> dict[str, float]:
    """{role: tokens/s one instance of it sustains}: generated tokens for mixed and decode, prompt tokens for
    prefill; a role the estimate gives no figure for is left out (utilisation is then no signal for it)."""
    out: dict[str, float] = {}
    decoding = [i for i in est.instances if i.role in ("mixed", "decode")]
    if decoding and est.output_tokens_per_s > 0:
        out[decoding[0].role] = est.output_tokens_per_s / len(decoding)
    prefill = [i.prefill_tokens_per_s for i in est.instances if i.role == "prefill" and i.prefill_tokens_per_s]
    if prefill:
        out["prefill"] = float(min(prefill))
    return out
