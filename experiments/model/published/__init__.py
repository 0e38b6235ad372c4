"""Published measurements of LLM serving (vendor-claim evidence) and the model's calibration on them.

`llm-serving.json`: measured figures from NVIDIA, AMD and serving-engine benchmark pages, each
naming its source (url, version, the date it was read) and split into a calibration and a
held-out set. `llm-calibration.json`: what `luma model calibrate --llm` fits on the first and
measures on the second (experiments/model/llm_calibrate.py); the LLM projections state it.
"""
