"""``ndgrad.nn``: modules, parameters, ``functional``, ``init``, ``parallel`` and ``utils``."""

from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import *  # noqa: F401,F403
from . import parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401
