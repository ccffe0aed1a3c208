"""``Interpreter`` (torch.fx's): runs a ``GraphModule`` node by node. ``run_node`` fetches a
node's arguments from the environment and calls the method named after its opcode
(``placeholder``, ``get_attr``, ``call_function``, ``call_method``, ``call_module``, ``output``);
override those to observe or change execution. Values are dropped after their last use."""

from __future__ import annotations

import contextlib

from .node import Node, map_arg, user_to_last_uses

__all__ = ["Interpreter"]


class Interpreter:
    """Run ``module``'s graph (or ``graph``) on arguments.

    >>> import ndgrad
    >>> from ndgrad.compiler import capture
    >>> x = ndgrad.ones(2)
    >>> Interpreter(capture(lambda x: x + 1, x)).run(x)
    tensor([2., 2.])
    """

    def __init__(self, module, garbage_collect_values: bool = True, graph=None):
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.env: dict = {}
        self.garbage_collect_values = garbage_collect_values
        self.current_node = None
        if garbage_collect_values:
            self.user_to_last_uses = user_to_last_uses(self.graph.nodes)

    def run(self, *args, initial_env: dict | None = None, enable_io_processing: bool = True):
        """Run the graph on ``args`` (one per placeholder; a missing one takes its default);
        returns what the output node returns."""
        self.env = dict(initial_env or {})
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue  # given in initial_env
            self.env[node] = self.run_node(node)
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, ()):
                    self.env.pop(dead, None)
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list: list):
        """``run`` on a list it clears, so the caller holds no reference to the inputs."""
        args = list(args_list)
        args_list.clear()
        return self.run(*args)

    @contextlib.contextmanager
    def _set_current_node(self, node: Node):
        old, self.current_node = self.current_node, node
        try:
            yield
        finally:
            self.current_node = old

    def run_node(self, n: Node):
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return getattr(self, n.op)(n.target, args, kwargs)

    # --- one method per opcode ---
    def placeholder(self, target, args, kwargs):
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from None

    def get_attr(self, target, args, kwargs):
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    # --- helpers ---
    def fetch_attr(self, target: str):
        obj = self.module
        path = []
        for atom in target.split("."):
            path.append(atom)
            if not hasattr(obj, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(path)}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node):
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n: Node):
        def load(a):
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run Graph.lint() "
                                   "to diagnose such issues")
            return self.env[a]

        return map_arg(args, load)
