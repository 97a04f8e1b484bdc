"""Data: the Playground's toy sets, MNIST, TensorDataset and DataLoader."""
from .loader import DataLoader, TensorDataset
from .mnist_dataset import MNIST, download_mnist, mnist
from .toy import DATASETS, Split, circles, gaussians, spirals, xor

__all__ = ["DATASETS", "DataLoader", "MNIST", "Split", "TensorDataset", "circles", "download_mnist", "gaussians",
           "mnist", "spirals", "xor"]
