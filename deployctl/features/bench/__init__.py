"""`deployctl bench`: measure a deployed endpoint with AIPerf (NVIDIA's OpenAI-compatible load generator, on
PyPI, no torch) and compare every point with the performance model's estimate.

* extra.py    - what bench needs beyond the core install (the `bench` extra), asked for by name when missing;
* suites.py   - the points to measure: the built-in long-context and concurrency suites, flags, YAML files;
* prompts.py  - prompts of a given length in tokens, and the word-level tokenizer AIPerf is given (no download);
* aiperf.py   - one AIPerf run per point (argv, no shell) and reading its per-request records;
* stats.py    - percentiles and the summary of one point;
* estimate.py - `deployctl.core.sizing.estimate.estimate_point` (lazily; "-" when it is absent or refuses a point);
* plots.py    - PNG plots (matplotlib, Agg);
* report.py   - the Markdown report;
* run.py      - the whole run, recorded under <run-dir>/runs/<id>-bench/.
"""
