"""Learning-rate schedules with torch.optim.lr_scheduler's names, arguments and lr sequences.

A scheduler only sets group["lr"] (and, for the cyclic ones, the momentum or beta1) in its
optimizer's param_groups; the optimizer reads the groups at every step, replays of webgrad.jit
included, so a schedule reaches recorded steps too. The arithmetic follows torch's term for term
(its recursive forms, and the closed forms step(epoch) uses), so the sequences are the same floats.
state_dict() holds the same attributes as torch's.

scheduler.py      the LRScheduler base
multiplicative.py LambdaLR, MultiplicativeLR, StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR,
                  PolynomialLR
cosine.py         CosineAnnealingLR, CosineAnnealingWarmRestarts
cyclic.py         CyclicLR, OneCycleLR (they cycle the momentum too)
plateau.py        ReduceLROnPlateau
combinators.py    SequentialLR, ChainedScheduler
"""
from .combinators import ChainedScheduler, SequentialLR
from .cosine import CosineAnnealingLR, CosineAnnealingWarmRestarts
from .cyclic import CyclicLR, OneCycleLR
from .multiplicative import (ConstantLR, ExponentialLR, LambdaLR, LinearLR, MultiplicativeLR, MultiStepLR,
                             PolynomialLR, StepLR)
from .plateau import ReduceLROnPlateau
from .scheduler import EPOCH_DEPRECATION_WARNING, LRScheduler

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "SequentialLR", "PolynomialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR"]
