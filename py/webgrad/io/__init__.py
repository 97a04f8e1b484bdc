"""Files: safetensors for weights (PyTorch loads them), IDX for the MNIST data."""
from .idx import read_idx
from .safetensors import load, save

__all__ = ["load", "read_idx", "save"]
