"""wg.jit's fused kernels in the page: the browser's WGSL compiler takes the generated sources (chains
of maps, and products, max pools and sums with maps in their store), and a fused replay gives the unfused replay's and
the eager results there, bit for bit."""
from e2e.conftest import ran_output

CODE = """
import random
import webgrad as wg
from webgrad import nn
from webgrad.nn import functional as F

rng = random.Random()
def t(*shape):
    return wg.tensor([rng.gauss(0, 1) for _ in range(shape[0] * shape[1])], device="webgpu").reshape(shape)

def same_three_ways(f, inputs):
    '''Whether f fused, unfused and eager agree on three fresh inputs; the dispatches fusion saved.'''
    fused, plain = wg.jit(f), wg.jit(f, fuse=False)
    same = True
    for _ in range(3):
        args = inputs()
        results = [[r.tolist() for r in g(*args)] for g in (fused, plain, f)]
        same = same and results[0] == results[1] == results[2]
    count = lambda j: len(next(iter(j._programs.values())).recording.dispatches)
    return same, count(plain) - count(fused)

def maps(x, y, row):
    keep = (x > 0.0) & (y < x)   # bool compute between float maps
    z = wg.where(keep, (x * row + y).exp() * 0.5, y.t().t() - x)
    return z.relu() / (y.abs() + 2.0), (x - row).sum(dim=1)

layer, w = nn.Linear(12, 20, device="webgpu"), t(20, 6).requires_grad_()
def epilogues(x):
    layer.zero_grad()
    w.grad = None
    (F.gelu(layer(x)).relu() @ w).sum().backward()
    return layer.weight.grad * 1.0, w.grad * 1.0

v = t(2, 108).reshape(2, 3, 6, 6).requires_grad_()
def pools(x):
    v.grad = None
    y = F.max_pool2d((v * x).relu(), 2)
    ((y.sum(dim=(2, 3)) + 1.0).sqrt() * 2.0).sum().backward()
    return (v.grad * 1.0,)

print('FUSION', *same_three_ways(maps, lambda: (t(33, 20), t(33, 20), t(1, 20))))
print('EPILOGUES', *same_three_ways(epilogues, lambda: (t(9, 12),)))
print('POOLS', *same_three_ways(pools, lambda: (t(2, 108).reshape(2, 3, 6, 6),)))
"""


def test_fused_kernels_compile_and_agree_in_the_page(page, open_playground):
    open_playground()
    out = ran_output(page, CODE, "POOLS", 60)
    # gt, lt, and, mul, add, exp, mul, sub, where, relu, abs, add, div: one kernel; x - row (which the
    # sum reads) another: 14 maps in 2
    assert "FUSION True 12" in out, out
    # as natively: the maps after the forward and backward products go into their stores
    assert "EPILOGUES True 7" in out, out
    # of 16 dispatches, 7: + 1.0, sqrt and * 2.0 in the sum's store, relu's gradient and the two
    # products after it in the pool backward's (the forward's mul and relu one kernel, the gradient's
    # maps over the sums' 6 elements another)
    assert "POOLS True 9" in out, out
