"""Optimizers with torch.optim's names; each parameter's update is one fused kernel."""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Optimizer", "lr_scheduler"]
