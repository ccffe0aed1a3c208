"""Optimizers (SGD, Adam, AdamW, NAdam, RAdam, Adamax, Adafactor, RMSprop, Rprop, Adagrad,
Adadelta, ASGD, LBFGS),
``lr_scheduler`` and ``swa_utils`` (weight averaging).

All with torch's API.

Updates run in place on the parameters' NumPy arrays (see optimizer.py); NAdam, RAdam, Adamax,
Adafactor, Rprop, ASGD, Adadelta and LBFGS update through Tensor ops under ``no_grad``.
"""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adafactor", "RMSprop",
           "Rprop", "Adagrad", "Adadelta", "ASGD", "LBFGS", "lr_scheduler", "swa_utils"]
