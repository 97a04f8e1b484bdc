"""Bad calls to the public API raise what PyTorch raises (the same exception class, checked by
running the same call on torch), with a message that names the problem, and (on webgpu) before any
GPU work: no buffer allocated, written or read, no kernel dispatched.

Each case is written once against a module `lib` (webgrad or torch: their APIs agree) and a device:
make(lib, device, other) builds the inputs, call(lib, *inputs) is the bad call. torch runs it on
cpu, with 'meta' as the other device; webgrad on each device, with the other one of cpu/webgpu."""
import builtins
import re

import pytest
import torch

import webgrad as wg
from conftest import DEVICES, tag

OTHER = {"cpu": "webgpu", "webgpu": "cpu"}


def ones(lib, dev, *shape, **kw):
    return lib.ones(*shape, device=dev, **kw)


def f32(lib, dev, data):
    return lib.tensor(data, dtype=lib.float32, device=dev)


def labels(lib, dev, data):
    return lib.tensor(data, dtype=lib.long, device=dev)


def leaf(lib, dev, *shape):
    return lib.ones(*shape, device=dev, requires_grad=True)


# name: (make(lib, dev, other) -> inputs, call(lib, *inputs), regex our message must match, devices)
CASES = {
    # ---- shapes ----
    "add: shapes that do not broadcast": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 4)),
                                          lambda L, a, b: a + b, r"3.*4"),
    "mse_loss: shapes that do not broadcast": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 4)),
                                               lambda L, a, b: L.nn.functional.mse_loss(a, b), r"3.*4"),
    "matmul: inner dims differ": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 4, 5)),
                                  lambda L, a, b: a @ b, r"3.*4"),
    "matmul: a 0-d operand": (lambda L, d, o: (f32(L, d, 1.0), ones(L, d, 2)),
                              lambda L, a, b: a @ b, r"1-?D|dim"),
    "matmul: batch dims do not broadcast": (lambda L, d, o: (ones(L, d, 2, 2, 3), ones(L, d, 3, 3, 4)),
                                            lambda L, a, b: a @ b, r"2.*3"),
    "matmul: float32 @ int32": (lambda L, d, o: (ones(L, d, 2, 2), ones(L, d, 2, 2, dtype=L.int32)),
                                lambda L, a, b: a @ b, r"dtype|float.*int"),
    "cat: sizes differ off the cat dim": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 2, 4)),
                                          lambda L, a, b: L.cat([a, b], dim=0), r"3.*4|size"),
    "cat: no tensors": (lambda L, d, o: (), lambda L: L.cat([]), r"empty|no tensors"),
    "cat: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: L.cat([a, a], dim=2),
                              r"[Dd]im.*2|range"),
    "stack: shapes differ": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 3, 2)),
                             lambda L, a, b: L.stack([a, b]), r"\(2, 3\)|\[2, 3\]|equal size|same shape"),
    "reshape: size differs": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.reshape(4, 2),
                              r"\[4, 2\]|\(4, 2\).*6|6"),
    "reshape: two -1": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.reshape(-1, -1),
                        r"one dimension|-1"),
    "reshape: -1 that does not divide": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.reshape(-1, 4),
                                         r"4.*6|6"),
    "view: of a non-contiguous tensor": (lambda L, d, o: (ones(L, d, 2, 3).t(),), lambda L, a: a.view(6),
                                         r"contiguous|reshape"),
    "expand: to an incompatible size": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.expand(4, 3),
                                        r"2.*4|4.*2"),
    "permute: a dim twice": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.permute(0, 0), r"duplicate|permutation"),
    "permute: too few dims": (lambda L, d, o: (ones(L, d, 2, 3, 4),), lambda L, a: a.permute(1, 0),
                              r"dims|number"),
    "transpose: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.transpose(0, 2),
                                    r"[Dd]im.*2|range"),
    "sum: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.sum(dim=2), r"[Dd]im.*2|range"),
    "softmax: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.softmax(dim=-3),
                                  r"[Dd]im.*-3|range"),
    "unsqueeze: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.unsqueeze(4),
                                    r"[Dd]im.*4|range"),
    "squeeze: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.squeeze(2),
                                  r"[Dd]im.*2|range"),
    "flatten: start_dim out of range": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a.flatten(3),
                                        r"[Dd]im.*3|range"),
    "zeros: a negative size": (lambda L, d, o: (), lambda L: L.zeros(2, -1), r"negative|-1"),
    # ---- devices ----
    "add: tensors on two devices": (lambda L, d, o: (ones(L, d, 2), ones(L, o, 2)), lambda L, a, b: a + b,
                                    r"device"),
    "cat: tensors on two devices": (lambda L, d, o: (ones(L, d, 2), ones(L, o, 2)),
                                    lambda L, a, b: L.cat([a, b]), r"device"),
    "where: tensors on two devices": (lambda L, d, o: (ones(L, d, 3, dtype=L.bool), ones(L, d, 3), ones(L, o, 3)),
                                      lambda L, c, a, b: L.where(c, a, b), r"device"),
    "Linear: input on another device": (lambda L, d, o: (L.nn.Linear(3, 2).to(d), ones(L, o, 4, 3)),
                                        lambda L, layer, x: layer(x), r"device"),
    "zeros: a device that does not exist": (lambda L, d, o: (), lambda L: L.zeros(2, device="gpu7"), r"gpu7"),
    # ---- indices ----
    "index: past the end": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a[3], r"3.*size 3|out of"),
    "index: negative past the start": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a[-4], r"-4"),
    "index: second dim past its end": (lambda L, d, o: (ones(L, d, 2, 3),), lambda L, a: a[0, 3],
                                       r"3.*dim.*1|out of"),
    "index: too many indices": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a[0, 0], r"too many|indices"),
    "index: a float": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a[1.5], r"float"),
    "index: a string": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a["a"], r"str"),
    "index: a tensor index past the end (cpu)": (lambda L, d, o: (ones(L, d, 3), labels(L, d, [0, 3])),
                                                 lambda L, a, i: a[i], r"3.*size 3|out of", ("cpu",)),
    "index_select: dim out of range": (lambda L, d, o: (ones(L, d, 2, 3), labels(L, d, [0])),
                                       lambda L, a, i: a.index_select(2, i), r"[Dd]im.*2|range"),
    "gather: index of another ndim": (lambda L, d, o: (ones(L, d, 2, 3), labels(L, d, [0, 1])),
                                      lambda L, a, i: a.gather(1, i), r"dim|same number"),
    "gather: a float index": (lambda L, d, o: (ones(L, d, 2, 3), ones(L, d, 2, 1)),
                              lambda L, a, i: a.gather(1, i), r"int|dtype"),
    # ---- losses and layers ----
    "cross_entropy: float labels": (lambda L, d, o: (ones(L, d, 4, 3), L.zeros(4, device=d)),
                                    lambda L, x, y: L.nn.functional.cross_entropy(x, y), r"float|dtype|int"),
    "cross_entropy: batch sizes differ": (lambda L, d, o: (ones(L, d, 4, 3), labels(L, d, [0] * 5)),
                                          lambda L, x, y: L.nn.functional.cross_entropy(x, y), r"4.*5"),
    "cross_entropy: 2-d labels": (lambda L, d, o: (ones(L, d, 4, 3), labels(L, d, [[0]] * 4)),
                                  lambda L, x, y: L.nn.functional.cross_entropy(x, y), r"1-?D|target|label"),
    "cross_entropy: a label past the classes (cpu)": (lambda L, d, o: (ones(L, d, 4, 3), labels(L, d, [0, 1, 2, 3])),
                                                      lambda L, x, y: L.nn.functional.cross_entropy(x, y),
                                                      r"3", ("cpu",)),
    "where: a float condition": (lambda L, d, o: (ones(L, d, 3), ones(L, d, 3), ones(L, d, 3)),
                                 lambda L, c, a, b: L.where(c, a, b), r"bool"),
    "Linear: input of the wrong width": (lambda L, d, o: (L.nn.Linear(3, 2).to(d), ones(L, d, 4, 5)),
                                         lambda L, layer, x: layer(x), r"5.*3|3.*5"),
    "Conv2d: input of the wrong channels": (lambda L, d, o: (L.nn.Conv2d(3, 4, 3).to(d), ones(L, d, 1, 2, 8, 8)),
                                            lambda L, layer, x: layer(x), r"3 channels"),
    "Conv2d: a 2-d input": (lambda L, d, o: (L.nn.Conv2d(3, 4, 3).to(d), ones(L, d, 8, 8)),
                            lambda L, layer, x: layer(x), r"4-?D"),
    "Conv2d: kernel larger than the input": (lambda L, d, o: (L.nn.Conv2d(3, 4, 5).to(d), ones(L, d, 1, 3, 3, 3)),
                                             lambda L, layer, x: layer(x), r"[Kk]ernel|too small|5"),
    "max_pool2d: window larger than the input": (lambda L, d, o: (ones(L, d, 1, 1, 2, 2),),
                                                 lambda L, x: L.nn.functional.max_pool2d(x, 3), r"small|3|size"),
    "load_state_dict: a missing key": (lambda L, d, o: (L.nn.Linear(3, 2).to(d), ones(L, d, 2, 3)),
                                       lambda L, layer, w: layer.load_state_dict({"weight": w}), r"bias"),
    "load_state_dict: a shape that differs": (lambda L, d, o: (L.nn.Linear(3, 2).to(d), ones(L, d, 3, 3), ones(L, d, 2)),
                                              lambda L, layer, w, b: layer.load_state_dict({"weight": w, "bias": b}),
                                              r"weight.*3"),
    # ---- optimizers ----
    "SGD: a float among the params": (lambda L, d, o: (), lambda L: L.optim.SGD([1.0], lr=0.1), r"float"),
    "SGD: one tensor, not an iterable": (lambda L, d, o: (leaf(L, d, 2),), lambda L, p: L.optim.SGD(p, lr=0.1),
                                         r"iterable"),
    "SGD: no params": (lambda L, d, o: (), lambda L: L.optim.SGD([], lr=0.1), r"empty"),
    "SGD: a non-leaf param": (lambda L, d, o: (leaf(L, d, 2) * 2,), lambda L, p: L.optim.SGD([p], lr=0.1),
                              r"leaf"),
    "SGD: a negative learning rate": (lambda L, d, o: (leaf(L, d, 2),), lambda L, p: L.optim.SGD([p], lr=-0.1),
                                      r"learning rate|lr"),
    "Adam: a beta of 1.5": (lambda L, d, o: (leaf(L, d, 2),), lambda L, p: L.optim.Adam([p], betas=(1.5, 0.9)),
                            r"beta"),
    # ---- construction and conversion ----
    "tensor: a ragged list": (lambda L, d, o: (), lambda L: L.tensor([[1.0, 2.0], [3.0]]), r"length|ragged|2.*1"),
    "tensor: a number among lists": (lambda L, d, o: (), lambda L: L.tensor([[1.0, 2.0], 3.0]), r"sequence|ragged"),
    "tensor: a string": (lambda L, d, o: (), lambda L: L.tensor("abc"), r"str"),
    "tensor: a string in a list": (lambda L, d, o: (), lambda L: L.tensor([1.0, "a"]), r"str"),
    "tensor: None": (lambda L, d, o: (), lambda L: L.tensor(None), r"None"),
    "tensor: a dict": (lambda L, d, o: (), lambda L: L.tensor({"a": 1}), r"dict"),
    "tensor: int data that requires grad": (lambda L, d, o: (), lambda L: L.tensor([1, 2], requires_grad=True),
                                            r"float"),
    "zeros: a dtype name that does not exist": (lambda L, d, o: (), lambda L: L.zeros(2, dtype="float17"),
                                                r"float17"),
    "zeros: a number as dtype": (lambda L, d, o: (), lambda L: L.zeros(2, dtype=3), r"dtype"),
    "add: a string": (lambda L, d, o: (ones(L, d, 2),), lambda L, a: a + "a", r"str"),
    "item: of 3 elements": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: a.item(), r"3 elements|one element"),
    "float(): of 3 elements": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: float(a), r"one element|3"),
    "bool(): of 3 elements": (lambda L, d, o: (ones(L, d, 3),), lambda L, a: bool(a), r"ambiguous|more than one"),
    "backward: of a non-scalar": (lambda L, d, o: (leaf(L, d, 3) * 2,), lambda L, y: y.backward(), r"scalar"),
    "backward: of what needs no grad": (lambda L, d, o: (ones(L, d, 3).sum(),), lambda L, y: y.backward(),
                                        r"require"),
}


def _builtin(cls):
    """The builtin exception class that an exception class is, or derives from."""
    return next(c for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c)


def _torch_raises(make, call):
    try:
        call(torch, *make(torch, "cpu", "meta"))
    except Exception as e:
        return _builtin(type(e))
    raise AssertionError("torch accepts this call: not a bad call")


class _GPUWork:
    """Counts the webgpu runtime's allocations, writes, reads and dispatches while active."""
    CALLS = ("alloc", "write", "read", "dispatch")

    def __init__(self, monkeypatch):
        self.calls = []
        runtime = wg.get_backend("webgpu").runtime
        for name in self.CALLS:
            original = getattr(runtime, name)
            monkeypatch.setattr(runtime, name, self._counting(name, original))

    def _counting(self, name, original):
        def counted(*args, **kwargs):
            self.calls.append(name)
            return original(*args, **kwargs)
        return counted


# A case limited to ("cpu",) needs the values, which webgpu checks only by reading the GPU back.
PAIRS = [(case, device) for case, spec in CASES.items() for device in (spec[3] if len(spec) > 3 else DEVICES)]


@pytest.mark.parametrize("case,device", PAIRS)
def test_bad_call_raises_like_torch(case, device, monkeypatch):
    make, call, names = CASES[case][:3]
    expected = _torch_raises(make, call)
    inputs = make(wg, device, OTHER[device])
    work = _GPUWork(monkeypatch)
    with pytest.raises(Exception) as info:
        call(wg, *inputs)
    assert isinstance(info.value, expected), tag(
        f"{case}: webgrad raised {type(info.value).__name__} ({info.value}), torch raises {expected.__name__}")
    assert re.search(names, str(info.value)), tag(f"{case}: the message does not name the problem: {info.value}")
    assert not work.calls, tag(f"{case}: GPU work before the error: {work.calls}")
