"""Import stub, NOT torchvision: PyPI has no CPU torchvision for torch 2.13.0+cpu, and sglang's
bench_serving only imports it through multimodal config modules it never calls for the random
dataset. Any use raises."""
def __getattr__(name):
    raise ImportError(f"torchvision stub: {name} is unavailable")
