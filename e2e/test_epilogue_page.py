"""wg.jit's matmul epilogues in the page: the browser's WGSL compiler takes a product with maps in its
store, and a fused replay gives the unfused replay's and the eager results there, bit for bit."""
from e2e.conftest import wait_for

CODE = """
import random
import webgrad as wg
from webgrad import nn
from webgrad.nn import functional as F

rng = random.Random()
def t(*shape):
    return wg.tensor([rng.gauss(0, 1) for _ in range(shape[0] * shape[1])], device="webgpu").reshape(shape)

layer, w = nn.Linear(12, 20, device="webgpu"), t(20, 6).requires_grad_()
def f(x):
    layer.zero_grad()
    w.grad = None
    (F.gelu(layer(x)).relu() @ w).sum().backward()
    return layer.weight.grad * 1.0, w.grad * 1.0

fused, plain = wg.jit(f), wg.jit(f, fuse=False)
same = True
for _ in range(3):
    x = t(9, 12)
    results = [[r.tolist() for r in g(x)] for g in (fused, plain, f)]
    same = same and results[0] == results[1] == results[2]
count = lambda j: len(next(iter(j._programs.values())).recording.dispatches)
print('EPILOGUES', same, count(plain) - count(fused))
"""


def test_products_with_epilogues_compile_and_agree_in_the_page(page, open_playground):
    open_playground()
    page.fill("[data-testid=code]", CODE)
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('EPILOGUES')"
                   " || document.querySelector('[data-testid=status]').textContent.includes('error')", 45)
    out = page.text_content("[data-testid=output]")
    # 7 dispatches fewer, as natively: maps after the forward and backward products go into their stores
    assert "EPILOGUES True 7" in out, out
