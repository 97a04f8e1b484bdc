"""Data: the Playground's toy sets, TensorDataset and DataLoader."""
from .loader import DataLoader, TensorDataset
from .toy import DATASETS, Split, circles, gaussians, spirals, xor

__all__ = ["DATASETS", "DataLoader", "Split", "TensorDataset", "circles", "gaussians", "spirals", "xor"]
