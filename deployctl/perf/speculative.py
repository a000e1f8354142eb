"""Speculative decoding in the performance model: how many drafted tokens a step accepts, per method."""

from __future__ import annotations

# EAGLE/EAGLE3 acceptance of each draft position (the share of steps whose position i is accepted), the values
# vllm-ascend's spec-decode CI holds its drafters to: vllm-project/vllm-ascend@182b75ea
# tests/e2e/pull_request/one_card/spec_decode/utils.py L36-38 (greedy, four short chat prompts, 8B targets with
# their published EAGLE/EAGLE3 heads). Positions past the third have no source: counted as not accepted.
DRAFT_ACCEPTANCE = {"eagle": (0.74, 0.44, 0.29), "eagle3": (0.68, 0.40, 0.18)}
MTP_ACCEPT = 0.7    # per position, geometric (CloudMatrix384 MTP1, planner-math.md §4.3)


def acceptance(method: str, drafts: int) -> tuple[float, float, str]:
    """(per-position acceptance the step model uses, accepted drafts per step, where it comes from)."""
    if method not in DRAFT_ACCEPTANCE:
        return (MTP_ACCEPT, sum(MTP_ACCEPT ** i for i in range(1, drafts + 1)),
                "acceptance 0.7 per position (CloudMatrix384 MTP1, planner-math.md §4.3; MTP3 gives 1.53 against "
                "cann-recipes' measured 1.44)")
    rates = DRAFT_ACCEPTANCE[method]
    accepted = sum(rates[:drafts])
    # the step model counts a + a^2 + ... accepted drafts: the a that gives the same expectation
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(mid ** i for i in range(1, drafts + 1)) < accepted else (lo, mid)
    note = (f"{method} acceptance per position {', '.join(map(str, rates[:drafts]))} = {accepted:.2f} accepted "
            "per step (vllm-ascend@182b75ea tests/e2e/pull_request/one_card/spec_decode/utils.py L36-38, 8B "
            "targets, short prompts: unverified for large MoE models)")
    if drafts > len(rates):
        note += f"; positions past {len(rates)} have no source and count as not accepted"
    return round(lo, 4), accepted, note
