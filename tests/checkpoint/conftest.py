from __future__ import annotations

import pytest

from deployctl import catalog


@pytest.fixture(autouse=True)
def _forget_checkpoint_models():
    """Models registered from a checkpoint (model.config_path) stay in this process: drop them after each test."""
    before = dict(catalog._FROM_CHECKPOINT), dict(catalog._ARCH_FROM_CHECKPOINT)
    yield
    for live, saved in zip((catalog._FROM_CHECKPOINT, catalog._ARCH_FROM_CHECKPOINT), before):
        live.clear()
        live.update(saved)
