"""A small transcribed sample of MLPerf Inference results, for tests (users point `luma import mlperf-results` at their clone)."""
