"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, LBFGS) and ``lr_scheduler``.

All with torch's API.

Updates run in place on the parameters' NumPy arrays (see optimizer.py); Adadelta and LBFGS
update through Tensor ops under ``no_grad``.
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
           "lr_scheduler"]
