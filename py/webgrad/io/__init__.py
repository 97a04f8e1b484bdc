"""Files: checkpoints in PyTorch's format (safetensors for *.safetensors paths), IDX for the MNIST data,
and whether a file's tensors fit a model (check_fits)."""
from .checkpoint import load, save
from .fitting import check_fits
from .idx import read_idx

__all__ = ["check_fits", "load", "read_idx", "save"]
