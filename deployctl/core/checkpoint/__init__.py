"""Model descriptions from a checkpoint's own small files (issue 26).

`describe(directory)` reads config.json, model.safetensors.index.json and msmodelslim's
quant_model_description*.json (read.py bounds and parses them), maps the architecture to its family
(families.py) and returns a `ModelDescription` (description.py); `planner.model_info()` turns it into the
catalog's `ModelInfo`, so the memory plan and the performance model size any supported family.
"""

from deployctl.core.checkpoint.describe import describe
from deployctl.core.checkpoint.description import ModelDescription

__all__ = ["ModelDescription", "describe"]
