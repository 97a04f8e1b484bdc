"""uint8 results in the page: the browser's WGSL compiler takes the map and gather kernels that pack
four bytes to a word (copies of strided views, cat, stack, writes through views, wrapping arithmetic,
casts, arange; indexing by tensors, lists and masks, flip, gather, sort, scatter_add) and the uint8
reductions, and they give the cpu device's values natively on the same fresh random bytes; so does
arithmetic on bools."""
import os

from e2e.conftest import run_in_page_and_natively

PROGRAM = '''
import random
import webgrad as wg


def run(device, seed):
    rng = random.Random(seed)

    def random_bytes(rows, cols):
        return wg.tensor([rng.randrange(256) for _ in range(rows * cols)], dtype=wg.uint8,
                         device=device).reshape(rows, cols)
    a, b = random_bytes(5, 7), random_bytes(5, 3)
    rows = wg.tensor([rng.randrange(4) for _ in range(7)], device=device)
    along = wg.tensor([[rng.randrange(7) for _ in range(3)] for _ in range(4)], device=device)
    mask = a[1:] > 127
    results = {
        "cat": wg.cat([a, b[:, 1:]], 1),
        "stack": wg.stack([a[:, 2:5], b.T.contiguous().T]),
        "transposed": a.T.contiguous(),
        "every other": a[1:, ::2].clone(),
        "wrapping": a[:, :3] * 7 + b - 300,
        "where": wg.where(a[:, 4:] > b, a[:, 4:], b),
        "cast": (a.float() * 1.5 - 200).to(wg.uint8),
        "arange": wg.arange(3, 250, 7, dtype=wg.uint8, device=device),
        "a[rows]": a[1:][rows],
        "a[list]": a[[4, 0, 3]],
        "a[mask]": a[1:][mask],
        "flip": wg.flip(a[1:], [1]),
        "gather": wg.gather(a[1:], 1, along),
        "sort": wg.sort(a[1:], 1)[0],
        "scatter_add": wg.scatter_add(a[1:4], 1, along[:3], a[2:]),
        "amax": a[1:].amax(1),
        "max": a[1:].max(0)[0],
        "min": a.min(),
        "bools": wg.stack([mask + mask[0], mask * True, mask ^ mask[:, :1]]),
    }
    b[1:, ::2] = a[0, :2]
    results["written"] = b
    return {name: [t.dtype.name, t.tolist()] for name, t in results.items()}
'''


def test_uint8_results_in_the_page_as_natively(page, open_playground):
    seed = int.from_bytes(os.urandom(4), "little")
    open_playground()
    in_page, native = run_in_page_and_natively(page, PROGRAM, ("webgpu", seed), ("cpu", seed))
    assert in_page == native, f"seed {seed}"
