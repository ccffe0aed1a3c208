"""``GradScaler``: dynamic loss scaling for mixed-precision training, as ``torch.amp.GradScaler``.

The scale is a float32 one-element tensor made on the device of the first tensor ``scale()``
sees. ``unscale_`` divides an optimizer's gradients by it in place and records, per device,
whether any was inf/NaN; ``step`` skips ``optimizer.step()`` then; ``update`` backs the scale
off or grows it. Autocast lives in ``autocast_mode.py``; the ``torch.cuda.amp`` / ``torch.cpu.amp``
aliases live with the package ``__init__``.
"""

from __future__ import annotations

import inspect
import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

import numpy as np

from .. import _dtype as D
from .. import _factories
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    # Module level, not a lambda, so that a scaler's defaultdict pickles.
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales the loss so that low-precision gradients do not underflow, and unscales the
    gradients before the optimizer steps (skipping the step when any is inf/NaN).

    A step is ``scale(loss).backward()``, ``step(optimizer)`` (unscale, then step unless a
    gradient overflowed) and ``update()`` (shrink the scale after an overflow, grow it after
    ``growth_interval`` clean steps).

    >>> import ndgrad
    >>> w = ndgrad.tensor([1.0], requires_grad=True)
    >>> opt = ndgrad.optim.SGD([w], lr=0.5)
    >>> scaler = GradScaler("cpu", init_scale=1024.0)
    >>> scaler.scale((w * 2).sum()).backward(); w.grad
    tensor([2048.])
    >>> scaler.step(opt); scaler.update(); w, scaler.get_scale()
    (tensor([0.], requires_grad=True), 1024.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from ..cuda import is_available

            if not is_available():
                warnings.warn(
                    "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                    stacklevel=2,
                )
                self._enabled = False
        # NOTE(pytorch): a disabled scaler keeps no settings (get_growth_factor() then raises
        # AttributeError there too) and skips the factor checks.
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made by the first scale(), on its device
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_fresh_state)

    # --- scaling ---
    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) "
               "earlier in the iteration.")
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        self._scale = _factories.tensor(float(self._init_scale), dtype=D.float32, device=dev)
        self._growth_tracker = _factories.tensor(self._init_growth_tracker, dtype=D.int32,
                                                 device=dev)

    def scale(self, outputs: Tensor | abc.Iterable) -> Tensor | abc.Iterable:
        """Multiplies ('scales') a tensor or list of tensors by the scale factor.

        Returns scaled outputs (lists and tuples keep their type, other iterables come back as a
        lazy ``map``). If this instance is not enabled, outputs are returned unmodified.
        """
        if not self._enabled:
            return outputs

        def apply(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(device=val.device, non_blocking=True)
            if isinstance(val, abc.Iterable):
                scaled = map(apply, val)
                return type(val)(scaled) if isinstance(val, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    # --- unscaling and stepping ---
    def _unscale_grads_(self, optimizer, inv_scale: Tensor, found_inf: Tensor,
                        allow_fp16: bool) -> dict:
        """Multiply every grad of ``optimizer`` by ``inv_scale`` in place; return {device: a copy
        of ``found_inf`` there, set to 1 if a grad on that device had an inf/NaN}. (PyTorch's
        private signature: sharded scalers override it.)"""
        per_device = {}  # device -> (inv_scale there, found_inf there)
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(  # noqa: TRY004 (PyTorch's type)
                            f"expected param to be torch.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype == D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    dev = grad.device
                    pair = per_device.get(dev)
                    if pair is None:
                        pair = per_device[dev] = (inv_scale.to(device=dev),
                                                  found_inf.to(device=dev, copy=True))
                    # Checked before the multiply, as PyTorch does (a finite scaled grad is clean
                    # even where unscaling by a scale below 1 would overflow it).
                    if not grad.isfinite().all():
                        pair[1].fill_(1.0)
                    grad.mul_(pair[0])
        return {dev: found for dev, (_, found) in per_device.items()}

    def unscale_(self, optimizer) -> None:
        """Divides ("unscales") the optimizer's gradient tensors by the scale factor.

        Optional: call it between ``backward`` and ``step`` to inspect or clip unscaled
        gradients; ``step`` then does not unscale again. At most once per optimizer per
        ``update()``.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # NOTE(pytorch): the reciprocal is taken in float64, then rounded to float32.
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = _factories.tensor(0.0, dtype=D.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf,
                                                             False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales the gradients (unless ``unscale_`` already did) and calls
        ``optimizer.step(*args, **kwargs)`` unless a gradient had an inf/NaN.

        Returns what ``optimizer.step`` returns, or None when the step was skipped. Closures
        are not supported.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        # NOTE(pytorch): only a closure passed by keyword is refused; a positional one reaches
        # optimizer.step.
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._step_scaling_aware(optimizer, state, args, kwargs)
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = self._maybe_opt_step(optimizer, state, *args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if any(f.item() for f in optimizer_state["found_inf_per_device"].values()):
            return None
        return optimizer.step(*args, **kwargs)

    def _step_scaling_aware(self, optimizer, state, args, kwargs):
        """Step an optimizer that unscales and skips by itself (``_step_supports_amp_scaling``):
        it gets the scaler as ``grad_scaler=`` (deprecated) or ``grad_scale``/``found_inf``
        attributes for the duration of its step."""
        by_kwarg = "grad_scaler" in inspect.signature(optimizer.step).parameters
        if by_kwarg:
            warnings.warn(
                "GradScaler is going to stop passing itself as a keyword argument to the passed "
                "optimizer. In the near future GradScaler registers `grad_scale: Tensor` and "
                "`found_inf: Tensor` to the passed optimizer and let the optimizer use them "
                "directly.", FutureWarning, stacklevel=3,
            )
            kwargs["grad_scaler"] = self
        else:
            if state["stage"] is OptState.READY:
                self._check_inf_per_device(optimizer)
            scale = self._scale
            found = sum(f.to(device=scale.device, non_blocking=True)
                        for f in state["found_inf_per_device"].values())
            # Grads already unscaled by unscale_() keep the user's own grad_scale (if any);
            # otherwise the optimizer divides by ours, times any it already had.
            optimizer.grad_scale = (getattr(optimizer, "grad_scale", None)
                                    if state["stage"] is OptState.UNSCALED
                                    else scale * getattr(optimizer, "grad_scale", 1))
            optimizer.found_inf = found
        retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        if not by_kwarg:
            del optimizer.grad_scale, optimizer.found_inf
        return retval

    def _check_inf_per_device(self, optimizer) -> dict:
        """Record inf/NaN in the optimizer's grads without changing them (inv_scale 1)."""
        scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        one = _factories.tensor(1.0, dtype=D.float32, device=scale.device)
        zero = _factories.tensor(0.0, dtype=D.float32, device=scale.device)
        state = self._per_optimizer_states[id(optimizer)]
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, one, zero, True)
        return state["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer) -> dict:
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    # --- the scale's schedule ---
    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Updates the scale factor: times ``backoff_factor`` if any optimizer step was skipped,
        times ``growth_factor`` after ``growth_interval`` consecutive unskipped iterations, or
        set to ``new_scale`` (a float or a 1-element tensor, copied) when given."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                          "torch.FloatTensor with requires_grad=False.")
                if (new_scale.device.type != self._device or new_scale.numel() != 1
                        or new_scale.requires_grad is True):
                    raise AssertionError(reason)
                scale.copy_(new_scale)
        else:
            found = [f for state in self._per_optimizer_states.values()
                     for f in state["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            # NOTE(pytorch): the products are taken in float64 and stored as float32; a growth
            # that would overflow float32 is dropped, and the count restarts either way. The
            # count must hit growth_interval exactly (lowering it below the count stops growth).
            if any(f.item() for f in found):
                scale.fill_(scale.item() * self._backoff_factor)
                tracker.fill_(0)
            else:
                clean = tracker.item() + 1
                if clean == self._growth_interval:
                    with np.errstate(over="ignore"):
                        grown = np.float32(scale.item() * self._growth_factor)
                    if np.isfinite(grown):
                        scale.fill_(float(grown))
                    clean = 0
                tracker.fill_(clean)
        self._per_optimizer_states = defaultdict(_fresh_state)

    # --- settings and state ---
    def _get_scale_async(self) -> Tensor | None:
        return self._scale

    def get_scale(self) -> float:
        """Returns a Python float containing the current scale, or 1.0 if scaling is disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        tracker = self._growth_tracker
        return self._init_growth_tracker if tracker is None else tracker.item()

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker; ``{}``
        when disabled. Call it after ``update()``."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads the scaler state (a no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError(
                    "A GradScaler instance may only be pickled at the beginning of an iteration, "
                    "or at the end after scaler.update().")
            # The tensors are rebuilt lazily by the unpickled scaler's first scale().
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
