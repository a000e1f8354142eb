"""Performance model: estimates before deploying (issue 14).

* ``hardware``: the SKU / link / efficiency catalog (hardware.yaml, arch.yaml), every value with its source;
  ``sku_for(hardware, name)``.
* ``core``: the step physics on plain parameters (``Setup``); ``calibration``: the published points and ``fit()``.
* ``model``: ``estimate_plan(plan, workload) -> PlanEstimate`` and ``estimate_point(plan, input_len, output_len,
  concurrency)`` (what ``deployctl bench`` compares with); ``models``: the result types.
* ``recommend``: ``recommend(inv, objective) -> list[Candidate]`` and ``apply_layout(text, layout)``.

Submodules are imported on use (nothing here pulls pydantic or PyYAML at import time). Every output is labelled
"estimated"; docs/performance-model.md describes the model, its fit and its error on the calibration points.
"""
