"""torch's top-level functions and `//` / `%` in the page: the same PyTorch program, on the same fresh
random inputs, run in the page (`import torch` gives webgrad on browser WebGPU) and natively under
real torch. The browser's WGSL compiler takes map.wgsl's exact fmod_f (every map kernel carries it),
and float remainders agree with torch's to the bit."""
import math
import os

from e2e.conftest import run_in_page_and_natively

PROGRAM = '''
import random
import torch


def run(seed):
    rng = random.Random(seed)

    def floats(n, lo=-3.0, hi=3.0):
        return torch.tensor([rng.uniform(lo, hi) for _ in range(n)])
    wide = torch.tensor([10 ** rng.uniform(-3, 7) * rng.choice([-1, 1]) for _ in range(256)])
    divisors = torch.tensor([10 ** rng.uniform(-3, 3) * rng.choice([-1, 1]) for _ in range(256)])
    i = torch.tensor([rng.randrange(-50, 50) for _ in range(64)])
    j = torch.tensor([rng.choice([-7, -3, -1, 2, 5]) for _ in range(64)])
    x, y = floats(24).reshape(4, 6), floats(24).reshape(4, 6)
    exact = {
        "fmod": torch.fmod(wide, divisors), "%": wide % divisors, "//": wide // divisors,
        "1 // 0.1": torch.tensor([1.0, -1.0, 7.5]) // 0.1, "int //": i // j, "int %": i % j,
        "int fmod": torch.fmod(i, j), "trunc": torch.div(i, j, rounding_mode="trunc"),
        "nonzero": torch.nonzero(i.reshape(8, 8) > 20), "unique": torch.unique(i % 5),
        "bincount": torch.bincount(i.abs() % 7), "eye": torch.eye(3, 4), "diag": torch.diag(x[0], 1),
        "repeat_interleave": torch.repeat_interleave(x[0, :3], torch.tensor([2, 0, 1])),
    }
    close = {
        "atan2": torch.atan2(x, y), "hypot": torch.hypot(x, y), "logaddexp": torch.logaddexp(x, y),
        "sinh": torch.sinh(x), "cosh": x.cosh(), "exp2": x.exp2(), "cumprod": x.cumprod(1),
        "mm": torch.mm(x, y.T), "bmm": torch.bmm(x.reshape(2, 2, 6), y.reshape(2, 6, 2)),
        "addmm": torch.addmm(x[0, :2], x[:, :3], y[:3, :2], beta=0.5), "median": x.median(1).values,
        "lerp": torch.lerp(x, y, 0.25), "var_mean": torch.stack(torch.var_mean(x, 1)),
    }
    return {kind: {name: [t.dtype.is_floating_point, t.flatten().tolist()] for name, t in group.items()}
            for kind, group in (("exact", exact), ("close", close))}
'''


def test_torch_functions_in_the_page_as_under_torch(page, open_playground):
    seed = int.from_bytes(os.urandom(4), "little")
    open_playground()
    in_page, expected = run_in_page_and_natively(page, PROGRAM, (seed,), (seed,))
    assert in_page["exact"] == expected["exact"], f"seed {seed}"
    for name, (floating, values) in expected["close"].items():
        got_floating, got = in_page["close"][name]
        assert got_floating == floating and len(got) == len(values), f"{name}, seed {seed}"
        assert all(math.isclose(g, v, rel_tol=1e-5, abs_tol=1e-5) for g, v in zip(got, values)), (
            f"{name}: {got} vs torch {values}, seed {seed}")
