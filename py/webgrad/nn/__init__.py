"""Neural-network modules, functional ops and initialisers, with torch.nn's names."""
from . import functional, init
from .conv import AvgPool2d, Conv2d, Dropout, MaxPool2d
from .layers import (ACTIVATIONS, GELU, CrossEntropyLoss, Flatten, Identity, LeakyReLU, Linear, MSELoss, ReLU,
                     Sequential, Sigmoid, Tanh, mlp)
from .models import MODELS, mnist_cnn, mnist_mlp, torch_equivalent
from .module import Module, Parameter
from .norm import BatchNorm1d, BatchNorm2d

__all__ = ["ACTIVATIONS", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "CrossEntropyLoss", "Dropout",
           "Flatten", "GELU", "Identity", "LeakyReLU", "Linear", "MODELS", "MSELoss", "MaxPool2d", "Module",
           "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "init", "mlp", "mnist_cnn",
           "mnist_mlp", "torch_equivalent"]
