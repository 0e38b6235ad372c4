"""Import stub (see torchvision/__init__.py): names exist, any call raises."""
import enum
class InterpolationMode(enum.Enum):
    NEAREST = "nearest"; NEAREST_EXACT = "nearest-exact"; BILINEAR = "bilinear"; BICUBIC = "bicubic"; LANCZOS = "lanczos"; BOX = "box"; HAMMING = "hamming"
class _Unavailable:
    def __init__(self, *a, **k):
        raise ImportError("torchvision stub: transforms are unavailable")
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Unavailable
