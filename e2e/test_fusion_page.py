"""wg.jit's fused kernels in the page: the browser's WGSL compiler takes the generated source, and a
fused replay gives the unfused replay's and the eager results there, bit for bit."""
from e2e.conftest import wait_for

CODE = """
import random
import webgrad as wg

rng = random.Random()
def t(*shape):
    return wg.tensor([rng.gauss(0, 1) for _ in range(shape[0] * shape[1])], device="webgpu").reshape(shape)

def f(x, y, row):
    keep = (x > 0.0) & (y < x)   # bool compute between float maps
    z = wg.where(keep, (x * row + y).exp() * 0.5, y.t().t() - x)
    return z.relu() / (y.abs() + 2.0), (x - row).sum(dim=1)

fused, plain = wg.jit(f), wg.jit(f, fuse=False)
same = True
for _ in range(3):
    x, y, row = t(33, 20), t(33, 20), t(1, 20)
    results = [[r.tolist() for r in g(x, y, row)] for g in (fused, plain, f)]
    same = same and results[0] == results[1] == results[2]
count = lambda j: len(next(iter(j._programs.values())).recording.dispatches)
print('FUSION', same, count(plain) - count(fused))
"""


def test_fused_kernels_compile_and_agree_in_the_page(page, open_playground):
    open_playground()
    page.fill("[data-testid=code]", CODE)
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('FUSION')"
                   " || document.querySelector('[data-testid=status]').textContent.includes('error')", 45)
    out = page.text_content("[data-testid=output]")
    # gt, lt, and, mul, add, exp, mul, sub, where, relu, abs, add, div: one kernel; x - row (which the
    # sum reads) another: 14 maps in 2
    assert "FUSION True 12" in out, out
