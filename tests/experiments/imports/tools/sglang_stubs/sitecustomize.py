"""Keeps transformers from treating the torchvision import stub (torchvision/) as real torchvision."""
import transformers.utils as _u
import transformers.utils.import_utils as _iu

_iu.is_torchvision_available = _u.is_torchvision_available = lambda: False
_iu.is_torchvision_v2_available = _u.is_torchvision_v2_available = lambda: False
