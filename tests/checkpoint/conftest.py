from __future__ import annotations

import pytest

from deployctl import catalog


@pytest.fixture(autouse=True)
def _forget_checkpoint_models():
    """Models registered from a checkpoint (model.config_path) stay in this process: drop them after each test."""
    registries = (catalog._FROM_CHECKPOINT, catalog._ARCH_FROM_CHECKPOINT, catalog._FAMILY_FROM_CHECKPOINT)
    before = [dict(r) for r in registries]
    yield
    for live, saved in zip(registries, before):
        live.clear()
        live.update(saved)
