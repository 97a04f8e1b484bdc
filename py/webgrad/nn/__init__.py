"""Neural-network modules, functional ops and initialisers, with torch.nn's names."""
from . import functional, init
from .layers import (ACTIVATIONS, GELU, CrossEntropyLoss, Flatten, Identity, LeakyReLU, Linear, MSELoss, ReLU,
                     Sequential, Sigmoid, Tanh, mlp)
from .module import Module, Parameter

__all__ = ["ACTIVATIONS", "GELU", "CrossEntropyLoss", "Flatten", "Identity", "LeakyReLU", "Linear", "MSELoss",
           "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "init", "mlp"]
