"""GradScaler: loss scaling for float16 training (torch.amp.GradScaler).

It multiplies the loss by a scale, divides the gradients by it before the optimizer step, and
skips the step where they overflowed. The scale, the count of clean steps and the overflow check
(one norm reduction over the gradients) live on the device. webgrad's optimizers take the check as
a tensor and skip their step on the device (optim/optimizer.py: their step counts live there
too), as torch's fused ones do, so nothing is read and a whole AMP training step runs under wg.jit.
Where unscale_ was not called, they also take the scale's inverse and unscale each gradient as
their fused update reads it, as torch's fused ones take grad_scale, writing it back unscaled as
torch's do (left scaled where the step is skipped, as torch's): no pass over the gradients but the
check is spent. unscale_ (for code that reads the gradients before step, as clipping does)
divides them in place, and the update then reads them as they are.
An optimizer whose step is its own (without `_step_supports_amp_scaling`) has its gradients
unscaled in place and the check read, and is stepped only where it is clean, as torch does; that
read keeps its step() out of wg.jit.
"""
from .. import autograd, dtypes
from .._tensor import Tensor
from .autocast_mode import _DEVICE_TYPES

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"   # an optimizer's stage since update()


class GradScaler:
    """torch.amp.GradScaler: scale(loss) before backward, then step(optimizer) (which unscales the
    gradients first, unless unscale_(optimizer) did) and update() once per iteration.

    step() skips the optimizer's step where a gradient holds inf or NaN, and update() then
    multiplies the scale by backoff_factor; after growth_interval steps without one it multiplies
    it by growth_factor. All of it on the device: step() reads nothing (but for an optimizer
    whose step is its own, whose overflow check it reads)."""

    def __init__(self, device="webgpu", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if device not in _DEVICE_TYPES:
            raise RuntimeError(f"GradScaler: unsupported device '{device}': webgrad's are 'webgpu' (or 'cuda', "
                               "its name in torch programs) and 'cpu'")
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale, self._init_growth_tracker = float(init_scale), 0
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = self._growth_tracker = None   # made on the loss's device by the first scale()
        self._per_optimizer_states = {}

    def _state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": _READY, "found_inf_per_device": {}})

    def _check_scale_growth_tracker(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate your script did not "
                                 "use scaler.scale(loss or outputs) earlier in the iteration.")

    def scale(self, outputs):
        """outputs (a tensor, or nested lists / tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                from ..ops.creation import full
                self._scale = full((), self._init_scale, dtype=dtypes.float32, device=outputs.device)
                self._growth_tracker = full((), self._init_growth_tracker, dtype=dtypes.int32, device=outputs.device)
            return outputs * self._scale.to(outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(v) for v in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale in place, and note on the device whether any
        holds inf or NaN (for step to read)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._state(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        by_device, _ = _grads_by_device(optimizer)
        with autograd.no_grad():
            for device, grads in by_device.items():
                inv_scale = self._inverse_scale(device)
                for g in grads:
                    g.mul_(inv_scale)
        state["found_inf_per_device"] = _found_inf(by_device)
        state["stage"] = _UNSCALED

    def _inverse_scale(self, device):
        """1 / scale, on device (the factor that unscales a gradient)."""
        with autograd.no_grad():
            return self._scale.to(device).reciprocal()

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless a gradient holds inf or NaN (unscaling them first
        where unscale_ was not called: in the fused update, for webgrad's optimizers); returns what
        it returns, or None when skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._state(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        fused = getattr(optimizer, "_step_supports_amp_scaling", False)   # skips its step on the device
        folded = False   # whether its update unscales the gradients as it reads them
        if state["stage"] is _READY:   # nothing read the gradients since backward
            # as torch, fp16 gradients are allowed there (the update computes in f32); a gradient two
            # parameters share would be unscaled twice by the update, which writes it back unscaled
            by_device, shared = _grads_by_device(optimizer, allow_fp16=fused)
            folded = fused and not shared
            if folded:
                state["found_inf_per_device"] = _found_inf(by_device)
            else:
                self.unscale_(optimizer)
        found = state["found_inf_per_device"]
        if not found:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if fused:
            first, *others = (f.to(self._scale.device) for f in found.values())
            optimizer.found_inf = sum(others, first)
            optimizer.inv_grad_scale = self._inverse_scale(self._scale.device) if folded else None
            try:
                result = optimizer.step(*args, **kwargs)
            finally:
                del optimizer.found_inf, optimizer.inv_grad_scale
        else:
            _check_not_recording(found)
            if not sum(f.item() for f in found.values()):   # the one read
                result = optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Set the scale for the next iteration: new_scale if given, else the growth / backoff rule
        applied to this iteration's overflow checks (on the device, nothing read)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        with autograd.no_grad():
            if new_scale is not None:
                self._set_scale(new_scale)
            else:
                found = [f.to(self._scale.device) for state in self._per_optimizer_states.values()
                         for f in state["found_inf_per_device"].values()]
                if not found:
                    raise AssertionError("No inf checks were recorded prior to update.")
                self._grow_or_back_off(sum(found[1:], found[0]))
        self._per_optimizer_states = {}

    def _set_scale(self, new_scale):
        if isinstance(new_scale, Tensor):
            if new_scale.numel() != 1 or new_scale.requires_grad:
                raise AssertionError("new_scale should be a float or a 1-element tensor with requires_grad=False.")
            self._scale.copy_(new_scale.reshape(()).to(self._scale.device, dtypes.float32))
        else:
            self._scale.fill_(float(new_scale))

    def _grow_or_back_off(self, found_inf):
        """torch._amp_update_scale_: an overflow multiplies the scale by backoff_factor and restarts
        the count of clean steps; the growth_interval-th clean step multiplies it by growth_factor
        (where that stays finite) and restarts the count."""
        from ..ops.elementwise import where
        from ..ops.unary import isfinite
        clean = found_inf == 0
        counted = self._growth_tracker + 1
        grow = clean & (counted == self._growth_interval)
        grown = self._scale * self._growth_factor
        scale = where(clean, where(grow & isfinite(grown), grown, self._scale), self._scale * self._backoff_factor)
        self._scale.copy_(scale)
        self._growth_tracker.copy_(where(clean & ~grow, counted, 0))

    def get_scale(self):
        """The scale as a Python float (1.0 when disabled); reads it from the device."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker.item()

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker, as torch's
        (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        with autograd.no_grad():
            if self._scale is not None:
                self._scale.fill_(self._init_scale)
                self._growth_tracker.fill_(self._init_growth_tracker)


def _grads_by_device(optimizer, allow_fp16=False):
    """optimizer's gradients by device, each gradient tensor once, and whether two parameters share one."""
    by_device, seen, shared = {}, set(), False
    for group in optimizer.param_groups:
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if g.dtype is dtypes.float16 and not allow_fp16:
                raise ValueError("Attempting to unscale FP16 gradients.")
            place = (id(g._storage), g._offset, g.shape, g._strides)
            shared |= place in seen
            if place not in seen:
                seen.add(place)
                by_device.setdefault(g.device, []).append(g)
    return by_device, shared


def _found_inf(by_device):
    """device -> 1.0 where a gradient there holds inf or NaN, else 0.0 (a 0-d float32 tensor). One
    reduction a device: the sum of |g| over all of them is finite exactly when every element is
    (short of a sum past float32's range, itself a sign the scale is too large). Scaling by a finite
    positive scale keeps an element finite or not, so scaled gradients give the same answer."""
    from ..nn.utils import get_total_norm
    from ..ops.unary import isfinite
    with autograd.no_grad():
        return {device: (~isfinite(get_total_norm(grads, 1.0))).float() for device, grads in by_device.items()}


def _check_not_recording(devices):
    """step() reads whether the gradients overflowed, to skip on the host the step of an optimizer
    that cannot skip it on the device; a wg.jit recording cannot read, so say what to write instead."""
    from ..backends import get_backend
    if "webgpu" in devices and get_backend("webgpu").runtime.is_recording:
        raise RuntimeError("GradScaler.step(optimizer) reads whether the gradients overflowed for an optimizer "
                           "whose step is its own (webgrad's optimizers skip theirs on the device), which a wg.jit "
                           "recording cannot: jit the forward and scaler.scale(loss).backward() (returning the "
                           "loss), then call scaler.step(optimizer) and scaler.update() after the jitted call")
