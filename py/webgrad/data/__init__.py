"""Data: the Playground's toy sets (and their input features) and MNIST; TensorDataset and DataLoader are
webgrad.utils.data's."""
from ..utils.data import DataLoader, TensorDataset
from ..utils.data.dataloader import TENSOR_INDEXED
from .mnist_dataset import MNIST, download_mnist, mnist
from .text import CORPORA, CharTokenizer, TextData, get_batch, load_text, names, shakespeare
from .toy import (DATASETS, FEATURES, REGRESSION_DATASETS, Split, circles, features, gaussians, multigauss, plane,
                  spirals, xor)

TENSOR_INDEXED.add(MNIST)   # its __getitem__ takes index tensors and gives collated batches

__all__ = ["DATASETS", "DataLoader", "FEATURES", "MNIST", "REGRESSION_DATASETS", "Split", "TensorDataset", "circles",
           "download_mnist", "features", "gaussians", "mnist", "multigauss", "plane", "spirals", "xor"]
__all__ += ["CORPORA", "CharTokenizer", "TextData", "get_batch", "load_text", "names", "shakespeare"]
