"""Ready-made models for MNIST (28x28 grey digits, 10 classes), shared by the CLI, the benchmark
and the page. Both are plain Sequentials, so their state_dict names are those of the same
torch.nn.Sequential (see torch_equivalent) and a saved file loads into it."""
from .conv import Conv2d, MaxPool2d
from .layers import Flatten, Linear, ReLU, Sequential


def mnist_mlp(hidden=128, device=None):
    """Flatten, 784 -> hidden, ReLU, hidden -> 10. The default is the 784-128-10 MLP."""
    return Sequential(Flatten(), Linear(28 * 28, hidden, device=device), ReLU(), Linear(hidden, 10, device=device))


def mnist_cnn(channels=(16, 32), hidden=128, device=None):
    """Two conv blocks (3x3 conv with padding 1, ReLU, 2x2 max pool: 28 -> 14 -> 7) and a
    classifier (Flatten, c2*7*7 -> hidden, ReLU, hidden -> 10)."""
    c1, c2 = channels
    return Sequential(
        Conv2d(1, c1, 3, padding=1, device=device), ReLU(), MaxPool2d(2),
        Conv2d(c1, c2, 3, padding=1, device=device), ReLU(), MaxPool2d(2),
        Flatten(), Linear(c2 * 7 * 7, hidden, device=device), ReLU(), Linear(hidden, 10, device=device))


MODELS = {"mlp": mnist_mlp, "cnn": mnist_cnn}


def torch_equivalent(model):
    """The torch.nn.Sequential of the same layers (needs PyTorch): load_state_dict takes this
    model's state_dict (or a file saved from it) and gives the same logits."""
    import torch
    from . import conv, layers
    from .norm import BatchNorm1d, BatchNorm2d

    # modules PyTorch rebuilds from constructor arguments they keep as attributes of the same names
    by_arguments = {
        layers.Flatten: ("start_dim", "end_dim"), layers.Unflatten: ("dim", "unflattened_size"),
        layers.LeakyReLU: ("negative_slope", "inplace"), layers.GELU: ("approximate",),
        layers.ELU: ("alpha", "inplace"), layers.Softplus: ("beta", "threshold"),
        layers.Hardtanh: ("min_val", "max_val", "inplace"), layers.Softmax: ("dim",), layers.LogSoftmax: ("dim",),
        layers.ReLU: ("inplace",), layers.ReLU6: ("inplace",), layers.SiLU: ("inplace",), layers.Mish: ("inplace",),
        conv.Dropout: ("p",), conv.Dropout1d: ("p",), conv.Dropout2d: ("p",), conv.Dropout3d: ("p",),
        layers.Tanh: (), layers.Sigmoid: (), layers.Identity: ()}

    def convert(m):
        if isinstance(m, Sequential):
            return torch.nn.Sequential(*(convert(c) for c in m))
        if isinstance(m, Linear):
            return torch.nn.Linear(m.in_features, m.out_features, bias=m.bias is not None)
        if isinstance(m, Conv2d):
            return torch.nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation,
                                   bias=m.bias is not None)
        if isinstance(m, MaxPool2d):
            return torch.nn.MaxPool2d(m.kernel_size, m.stride, m.padding, m.dilation)
        if isinstance(m, conv.AvgPool2d):
            return torch.nn.AvgPool2d(m.kernel_size, m.stride, m.padding)
        if isinstance(m, (BatchNorm1d, BatchNorm2d)):
            cls = torch.nn.BatchNorm1d if isinstance(m, BatchNorm1d) else torch.nn.BatchNorm2d
            return cls(m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats, bias=m.bias is not None)
        if type(m) in by_arguments:
            return getattr(torch.nn, type(m).__name__)(*(getattr(m, a) for a in by_arguments[type(m)]))
        raise TypeError(f"torch_equivalent: no torch.nn counterpart for {type(m).__name__}")

    return convert(model)
