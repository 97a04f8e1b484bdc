"""A module of webgrad against the same module of PyTorch: torch's state_dict is copied in (so the
names and shapes must be PyTorch's), then both run on the same fresh inputs and the outputs, the
inputs' gradients and every parameter's gradient are compared."""
import numpy as np
import torch

import webgrad as wg
from conftest import assert_close, randn, tag


def copy_from_torch(ours, theirs):
    """Load theirs' state_dict into ours (strict), after checking both have the same names and shapes."""
    ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
    assert [(k, tuple(v.shape)) for k, v in ours_sd.items()] == [(k, tuple(v.shape)) for k, v in theirs_sd.items()], \
        tag("state_dict names and shapes")
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs_sd.items()})


def compare_modules(ours, theirs, device, inputs, atol=1e-4, call=lambda m, *a: m(*a), grad_inputs=None):
    """Run both on the same inputs (NumPy arrays; floating ones get gradients unless grad_inputs says
    which; others pass as they are) and compare outputs and gradients of sum(out * random upstream)."""
    grad_inputs = [a.dtype.kind == "f" for a in inputs] if grad_inputs is None else grad_inputs
    ours_in = [wg.tensor(a, device=device, requires_grad=bool(g)) for a, g in zip(inputs, grad_inputs)]
    theirs_in = [torch.tensor(a, requires_grad=bool(g)) for a, g in zip(inputs, grad_inputs)]
    ours_out, theirs_out = call(ours, *ours_in), call(theirs, *theirs_in)
    assert ours_out.device == device and tuple(ours_out.shape) == tuple(theirs_out.shape), \
        tag(f"output {tuple(ours_out.shape)} on {ours_out.device} vs torch {tuple(theirs_out.shape)}")
    assert_close(ours_out, theirs_out, atol, atol, "output")
    upstream = randn(*theirs_out.shape)
    (ours_out * wg.tensor(upstream, device=device)).sum().backward()
    (theirs_out * torch.from_numpy(upstream)).sum().backward()
    for k, (o, t) in enumerate(zip(ours_in, theirs_in)):
        if t.requires_grad:
            assert_close(o.grad, t.grad, atol, atol, f"gradient of input {k}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        expected = theirs_params[name].grad
        got = p.grad
        if expected is None:
            assert got is None or not np.any(got.numpy()), tag(f"{name} has a gradient, torch's has none")
            continue
        assert_close(got, expected, atol, atol, f"gradient of {name}")
    return ours_out
