"""The analytical model of LUMA: *model predicts, simulator explores, PEX proves*.

* `llm` — transformer serving from a model config (weights, KV cache, activations; roofline
  prefill/decode time; tensor/pipeline-parallel communication; energy), vectorised in NumPy.
* `services` — the same terms for the services PEX sprints run on this host.
* `hardware` — the machine figures the model reads (`MachineLike`; machine records or machines
  declared in a space file) and unit-checked quantities.
* `space`, `evaluate`, `judge`, `predict` — states and spaces, their figures, a verdict per
  contract clause with the binding resource (`luma model predict`).
* `trials`, `probe`, `calibrate`, `facts` — trials on this host, the fitted efficiency figures,
  the model's error per metric as simulated facts in the KB (`luma model calibrate`).
* `simulate`, `plot` — vectorised sweeps: the minimum-cost PASS frontier, the binding resource per
  region, the states a sprint should measure (`luma model explore`).
* `guide` — the model's predicted boundary as the start of a sprint's bisection (`--model`).

Everything the model outputs is simulated or projected evidence; it never qualifies anything.
"""
