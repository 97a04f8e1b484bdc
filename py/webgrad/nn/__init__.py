"""Neural-network modules, functional ops and initialisers, with torch.nn's names."""
from . import functional, init, utils
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import AvgPool2d, Conv2d, Dropout, Dropout1d, Dropout2d, Dropout3d, MaxPool2d
from .layers import (ACTIVATIONS, ELU, GELU, Flatten, Hardtanh, Identity, LeakyReLU, Linear,
                     LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus, Tanh, Unflatten, mlp)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .models import MODELS, mnist_cnn, mnist_mlp, torch_equivalent
from .module import Module, Parameter
from .norm import BatchNorm1d, BatchNorm2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .activation import MultiheadAttention
from .gpt import GPT, GPTConfig
from .normalization import LayerNorm, RMSNorm
from .sparse import Embedding

__all__ = ["ACTIVATIONS", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "HuberLoss", "KLDivLoss", "L1Loss", "NLLLoss",
           "SmoothL1Loss", "BatchNorm1d", "BatchNorm2d", "Conv2d", "CrossEntropyLoss", "Dropout",
           "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Flatten", "GELU", "GRU", "GRUCell", "Hardtanh", "Identity",
           "LSTM", "LSTMCell", "LeakyReLU", "Linear", "LogSoftmax", "MODELS", "MSELoss", "MaxPool2d", "Mish",
           "Module", "ModuleDict", "ModuleList", "Parameter", "ParameterDict", "ParameterList", "RNN", "RNNBase",
           "RNNCell", "RNNCellBase", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh",
           "Unflatten", "functional", "init", "mlp", "mnist_cnn", "mnist_mlp", "torch_equivalent", "utils"]
__all__ += ["Embedding", "LayerNorm", "MultiheadAttention", "RMSNorm"]
__all__ += ["GPT", "GPTConfig"]
