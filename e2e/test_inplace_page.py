"""In-place writes in the page: the browser's WebGPU takes the map kernels that read their target's own
elements from the output's binding (x.add_(y), mul_, sub_ through strided views, into float32, int32
and bytes packed four to a word), and they give the cpu device's values natively on the same fresh
random inputs."""
import os

from e2e.conftest import run_in_page_and_natively

PROGRAM = '''
import random
import webgrad as wg


def run(device, seed):
    rng = random.Random(seed)
    x = wg.tensor([[rng.uniform(-2, 2) for _ in range(6)] for _ in range(4)], device=device)
    y = wg.tensor([rng.uniform(-2, 2) for _ in range(6)], device=device)
    n = wg.tensor([[rng.randrange(-99, 99) for _ in range(6)] for _ in range(4)], device=device)
    b = wg.tensor([[rng.randrange(256) for _ in range(6)] for _ in range(4)], dtype=wg.uint8, device=device)
    for step in range(3):
        x.add_(y, alpha=0.5 + step).mul_(x)
        x[:, 1::2].sub_(x[:, 1::2] * 0.25)
        x.t()[step].clamp_(-1.0, 1.0)
        n[step].add_(n[step]).mul_(3)
        b[:, step].mul_(7)
        b.t()[step + 1].add_(b.t()[step + 1])
        x[step + 1].zero_()
    return {name: [t.dtype.name, t.tolist()] for name, t in (("x", x), ("n", n), ("b", b))}
'''


def test_inplace_writes_in_the_page_as_natively(page, open_playground):
    seed = int.from_bytes(os.urandom(4), "little")
    open_playground()
    in_page, expected = run_in_page_and_natively(page, PROGRAM, ("webgpu", seed), ("cpu", seed))
    assert in_page.keys() == expected.keys()
    for name, (dtype, values) in expected.items():
        assert in_page[name][0] == dtype, (name, seed)
        if dtype == "float32":
            flat_page = [v for row in in_page[name][1] for v in row]
            flat_cpu = [v for row in values for v in row]
            assert all(abs(p - c) <= 1e-4 * (1 + abs(c)) for p, c in zip(flat_page, flat_cpu)), (name, seed)
        else:
            assert in_page[name][1] == values, (name, seed)
