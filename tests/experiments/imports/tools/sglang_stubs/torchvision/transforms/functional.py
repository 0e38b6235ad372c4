"""Import stub (see torchvision/__init__.py)."""
from torchvision.transforms import InterpolationMode, _Unavailable
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Unavailable
