"""Files: checkpoints in PyTorch's format (safetensors for *.safetensors paths), IDX for the MNIST data."""
from .checkpoint import load, save
from .idx import read_idx

__all__ = ["load", "read_idx", "save"]
