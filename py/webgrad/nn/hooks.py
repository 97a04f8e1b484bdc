"""Hook handles, and Module's full backward hooks (torch.utils.hooks.BackwardHook's semantics).

A module call with backward hooks passes its positional Tensor arguments through one identity
Function (_InputsHook) and its Tensor outputs through another (_OutputsHook). In the backward
pass the outputs' one runs first: it hands the gradients of the outputs (grad_output, None for an
output that got none) to the pre-hooks, which may replace them, and keeps them; the inputs' one
then calls each hook(module, grad_input, grad_output), whose non-None result replaces grad_input.
"""
import warnings

from ..autograd import Function, is_grad_enabled
from .._tensor import Tensor


class RemovableHandle:
    """What register_*_hook returns: remove() (or leaving a `with` block) takes the hook away."""
    _ids = iter(range(1 << 62))

    def __init__(self, hooks):
        self.hooks, self.id = hooks, next(RemovableHandle._ids)

    def remove(self):
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _spread(positions, values, size):
    """A tuple of `size` entries: values at positions, None elsewhere."""
    spread = [None] * size
    for k, value in zip(positions, values):
        spread[k] = value
    return tuple(spread)


class BackwardHook:
    """One module call's backward hooks: hooks(module, grad_input, grad_output) and
    pre_hooks(module, grad_output)."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.input_positions = None   # where the Tensor arguments are, when one requires grad

    def setup_inputs(self, args):
        self.n_inputs = len(args)
        positions = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
        if not (is_grad_enabled() and any(args[k].requires_grad for k in positions)):
            return args
        self.input_positions = positions
        args = list(args)
        for k, t in zip(positions, _InputsHook.apply(self, *[args[k] for k in positions])):
            args[k] = t
        return tuple(args)

    def setup_outputs(self, output):
        """output (a Tensor or a tuple), its Tensors passed through _OutputsHook."""
        single = isinstance(output, Tensor)
        outputs = (output,) if single else output if isinstance(output, tuple) else ()
        positions = [k for k, o in enumerate(outputs) if isinstance(o, Tensor)]
        if not (is_grad_enabled() and any(outputs[k].requires_grad for k in positions)):
            return output
        self.n_outputs, self.output_positions = len(outputs), positions
        hooked = list(outputs)
        for k, t in zip(positions, _OutputsHook.apply(self, *[outputs[k] for k in positions])):
            hooked[k] = t
        return hooked[0] if single else tuple(hooked)

    def outputs_backward(self, grads):
        grad_outputs = _through_hooks(self.pre_hooks, lambda hook, g: hook(self.module, g),
                                      _spread(self.output_positions, grads, self.n_outputs), "pre hook", "grad_output")
        self.grad_outputs = grad_outputs
        if self.input_positions is None:   # no input requires grad: the hooks run now
            if self.hooks:
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                              "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                              "details.", stacklevel=2)
            for hook in self.hooks:
                changed = hook(self.module, (None,) * self.n_inputs, grad_outputs)
                if changed is not None and any(g is not None for g in changed):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(grad_outputs[k] for k in self.output_positions)

    def inputs_backward(self, grads):
        if self.grad_outputs is None:   # the gradient came to the inputs without passing the outputs
            return grads
        grad_inputs = _through_hooks(self.hooks, lambda hook, g: hook(self.module, g, self.grad_outputs),
                                     _spread(self.input_positions, grads, self.n_inputs), "hook", "grad_input")
        self.grad_outputs = None
        return tuple(grad_inputs[k] for k in self.input_positions)


class _InputsHook(Function):
    """Identity over a module call's Tensor arguments; its backward runs the module's hooks."""
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.inputs_backward(grads))


class _OutputsHook(Function):
    """Identity over a module call's Tensor outputs; its backward runs the module's pre-hooks."""
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        ctx.set_materialize_grads(False)   # (an output that got no gradient: None in grad_output)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.outputs_backward(grads))


def _through_hooks(hooks, call, grads, kind, name):
    """grads through each hook in turn (call(hook, grads)): a result that is not None replaces them,
    and must be as many (torch's error naming the hook's kind and what it returned)."""
    for hook in hooks:
        changed = call(hook, grads)
        if changed is None:
            continue
        if len(changed) != len(grads):
            raise RuntimeError(f"Backward {kind} returned an invalid number of {name}, got {len(changed)}, but "
                               f"expected {len(grads)}")
        grads = tuple(changed)
    return grads
