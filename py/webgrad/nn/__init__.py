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
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .activation_layers import (CELU, GLU, SELU, CosineSimilarity, Hardshrink, Hardsigmoid, Hardswish, LogSigmoid,
                                PairwiseDistance, PReLU, Softmax2d, Softmin, Softshrink, Softsign, Tanhshrink,
                                Threshold)
from .conv_transpose import ConvTranspose1d, ConvTranspose2d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                      ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AdaptiveMaxPool3d, AvgPool1d, Conv1d, MaxPool1d)
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)
from .upsampling import PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .sparse import Embedding, EmbeddingBag

__all__ = ["ACTIVATIONS", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "HuberLoss", "KLDivLoss", "L1Loss", "NLLLoss",
           "SmoothL1Loss", "BatchNorm1d", "BatchNorm2d", "Conv2d", "CrossEntropyLoss", "Dropout",
           "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Flatten", "GELU", "GRU", "GRUCell", "Hardtanh", "Identity",
           "LSTM", "LSTMCell", "LeakyReLU", "Linear", "LogSoftmax", "MODELS", "MSELoss", "MaxPool2d", "Mish",
           "Module", "ModuleDict", "ModuleList", "Parameter", "ParameterDict", "ParameterList", "RNN", "RNNBase",
           "RNNCell", "RNNCellBase", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh",
           "Unflatten", "functional", "init", "mlp", "mnist_cnn", "mnist_mlp", "torch_equivalent", "utils"]
__all__ += ["Embedding", "EmbeddingBag", "LayerNorm", "MultiheadAttention", "RMSNorm"]
__all__ += ["GPT", "GPTConfig"]
__all__ += ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "Conv1d",
            "CosineSimilarity", "GLU", "GroupNorm", "Hardsigmoid", "Hardswish", "InstanceNorm1d", "InstanceNorm2d",
            "MaxPool1d", "PReLU", "PairwiseDistance", "PixelShuffle", "PixelUnshuffle", "SELU", "Softmin", "Softsign",
            "Tanhshrink", "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerEncoderLayer", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "CELU", "CircularPad1d", "CircularPad2d", "CircularPad3d",
            "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ConvTranspose1d", "ConvTranspose2d", "Hardshrink",
            "InstanceNorm3d", "LogSigmoid", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
            "ReplicationPad2d", "ReplicationPad3d", "Softmax2d", "Softshrink", "Threshold", "ZeroPad1d", "ZeroPad2d",
            "ZeroPad3d"]
