"""Model descriptions from a checkpoint's own small files (issue 26).

`describe_files(files)` takes config.json, model.safetensors.index.json and msmodelslim's
quant_model_description*.json (read by io/checkpoint_files.py, parsed by files.py), maps the architecture to its family
(families/) and returns a `ModelDescription` (description.py); `planner.model_info()` turns it into the
catalog's `ModelInfo`, so the memory plan and the performance model size any supported family.
"""

from deployctl.core.checkpoint.describe import describe_files
from deployctl.core.checkpoint.description import ModelDescription

__all__ = ["ModelDescription", "describe_files"]
