"""A cross-entropy's backward folded into its forward's dispatch under wg.jit (backends/webgpu/fusion_loss.py)
in the page: the browser's WGSL compiler takes the forward that writes d logits too, and a fused replay
gives the unfused replay's and the eager loss and gradient there, bit for bit, one dispatch fewer. And a
GPU's one-pass sum of a bias gradient (kernels/reduce.py's runs form, which a software adapter such as
the page's does not pick) compiles there and gives the two passes' sums."""
from e2e.conftest import ran_output

CODE = """
import random
import webgrad as wg
from webgrad.nn import functional as F

rng = random.Random()
rows, classes = rng.randrange(3, 40), rng.randrange(2, 12)
start = [rng.gauss(0, 1) for _ in range(rows * classes)]

def make():
    logits = wg.tensor(start, device="webgpu").reshape(rows, classes).requires_grad_()
    def step(x, y):
        logits.grad = None
        loss = F.cross_entropy(logits + x, y, ignore_index=-1)
        loss.backward()
        return loss, logits.grad
    return step

same = True
fused, plain, eager = wg.jit(make()), wg.jit(make(), fuse=False), make()
for _ in range(3):
    x = wg.tensor([rng.gauss(0, 1) for _ in range(rows * classes)], device="webgpu").reshape(rows, classes)
    y = wg.tensor([rng.randrange(-1, classes) for _ in range(rows)], device="webgpu").int()
    results = [[r.tolist() for r in step(x, y)] for step in (fused, plain, eager)]
    same = same and results[0] == results[1] == results[2]
count = lambda j: len(next(iter(j._programs.values())).recording.dispatches)
print('LOSS', same, count(plain) - count(fused))

planes = wg.tensor([rng.gauss(0, 1) for _ in range(9 * 3 * 30 * 32)], device="webgpu").reshape(9, 3, 30, 32)
backend = wg.get_backend("webgpu")
two_passes = planes.sum((0, 2, 3)).tolist()
backend.is_software = False
one_pass = planes.sum((0, 2, 3)).tolist()
backend.is_software = True
print('RUNS', all(abs(a - b) <= 1e-3 * (1 + abs(b)) for a, b in zip(one_pass, two_passes)))
"""


def test_the_folded_cross_entropy_compiles_and_agrees_in_the_page(page, open_playground):
    open_playground()
    out = ran_output(page, CODE, "RUNS", 60)
    assert "LOSS True 1" in out, out
    assert "RUNS True" in out, out
