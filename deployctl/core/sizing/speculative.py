"""Speculative decoding in the performance model: how many drafted tokens a step accepts, per method.

MTP: 0.7 per draft position, geometric (CloudMatrix384 MTP1, arXiv 2506.12708 §5.1). Draft-model methods (EAGLE,
EAGLE3): the per-position acceptance in speculative.yaml, each with its source; DFlash: a published mean accept
length at a block size, turned into the geometric per-position rate that gives it.
"""

from __future__ import annotations

from functools import cache
from deployctl.core.packaged import packaged_yaml

MTP_ACCEPT = 0.7


@cache
def draft_acceptance() -> dict:
    return packaged_yaml(__package__, "speculative.yaml")


def acceptance(method: str, drafts: int, measured: list[float] | None = None) -> tuple[float, float, str]:
    """(per-position acceptance the step model uses, accepted drafts per step, where it comes from); ``measured``
    (model.speculative.acceptance) wins over the method's published figure."""
    table = draft_acceptance()
    if measured:
        table = {method: {"per_position": list(measured), "source": "model.speculative.acceptance, as measured"}}
    if method not in table:
        return (MTP_ACCEPT, sum(MTP_ACCEPT ** i for i in range(1, drafts + 1)),
                "acceptance 0.7 per position (CloudMatrix384 MTP1, arXiv 2506.12708 §5.1; MTP3 gives 1.53 against "
                "cann-recipes-infer's 1.44 for DeepSeek-V3.2, a figure whose page is not recorded: unverified)")
    entry = table[method]
    if "accept_length" in entry:        # tokens per verify step at `drafts` drafts, the step's own token included
        rate = round(_geometric(entry["accept_length"] - 1, entry["drafts"]), 4)
        accepted = sum(rate ** i for i in range(1, drafts + 1))
        return rate, accepted, (f"{method} mean accept length {entry['accept_length']} at {entry['drafts']} drafts "
                                f"= {rate:.3f} per position (geometric), {accepted:.2f} accepted per step at "
                                f"{drafts} ({entry['source']})")
    rates = entry["per_position"]
    accepted = sum(rates[:drafts])
    lo = _geometric(accepted, drafts)
    note = (f"{method} acceptance per position {', '.join(map(str, rates[:drafts]))} = {accepted:.2f} accepted "
            f"per step ({table[method]['source']})")
    if drafts > len(rates):
        note += f"; positions past {len(rates)} have no source and count as not accepted"
    return round(lo, 4), accepted, note


def _geometric(accepted: float, drafts: int) -> float:
    """The a with a + a^2 + ... + a^drafts = accepted (how the step model counts accepted drafts)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(mid ** i for i in range(1, drafts + 1)) < accepted else (lo, mid)
    return lo
