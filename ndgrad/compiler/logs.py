"""The compile stack's log artifacts (PyTorch's ``TORCH_LOGS`` names): ``graph_breaks``,
``recompiles``, ``graph_code``, ``output_code``, each a logger under ``ndgrad.compiler``, silent
until ``set_logs`` (``ndgrad._logging.set_logs``) turns it on and prints it to stderr."""

from __future__ import annotations

import logging
import sys

__all__ = ["set_logs", "artifact", "ARTIFACTS"]

ARTIFACTS = ("graph_breaks", "recompiles", "graph_code", "output_code", "guards")
_loggers = {name: logging.getLogger(f"ndgrad.compiler.{name}") for name in ARTIFACTS}
_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
for _lg in _loggers.values():
    _lg.setLevel(logging.WARNING)  # artifacts log at DEBUG: off by default


def artifact(name: str) -> logging.Logger:
    return _loggers[name]


def set_logs(*, dynamo=None, graph_breaks: bool = False, recompiles: bool = False,
             graph_code: bool = False, output_code: bool = False, guards: bool = False,
             **_ignored) -> None:
    """Turn the compile stack's log artifacts on (printed to stderr) or off; a call sets all
    of them, as PyTorch's does. ``dynamo`` (a logging level) sets ``ndgrad.compiler``'s level.

    >>> import ndgrad
    >>> ndgrad._logging.set_logs(recompiles=True)
    >>> ndgrad._logging.set_logs()
    """
    wanted = {"graph_breaks": graph_breaks, "recompiles": recompiles, "graph_code": graph_code,
              "output_code": output_code, "guards": guards}
    for name, on in wanted.items():
        lg = _loggers[name]
        lg.setLevel(logging.DEBUG if on else logging.WARNING)
        if on and _handler not in lg.handlers:
            lg.addHandler(_handler)
        elif not on and _handler in lg.handlers:
            lg.removeHandler(_handler)
    if dynamo is not None:
        logging.getLogger("ndgrad.compiler").setLevel(dynamo)
