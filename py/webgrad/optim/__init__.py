"""Optimizers with torch.optim's names; a param group's parameters and state live in flat arenas
and one fused kernel updates them all (optim/arena.py, optim/optimizer.py)."""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Optimizer", "lr_scheduler"]
