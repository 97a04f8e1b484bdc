"""uint8 results in the page: the browser's WGSL compiler takes the map kernels that pack four bytes
to a word (copies of strided views, cat, stack, writes through views, wrapping arithmetic, casts,
arange), and they give the cpu device's values natively on the same fresh random bytes."""
import os

from e2e.conftest import printed_json

PROGRAM = '''
import random
import webgrad as wg


def run(device, seed):
    rng = random.Random(seed)

    def random_bytes(rows, cols):
        return wg.tensor([rng.randrange(256) for _ in range(rows * cols)], dtype=wg.uint8,
                         device=device).reshape(rows, cols)
    a, b = random_bytes(5, 7), random_bytes(5, 3)
    results = {
        "cat": wg.cat([a, b[:, 1:]], 1),
        "stack": wg.stack([a[:, 2:5], b.T.contiguous().T]),
        "transposed": a.T.contiguous(),
        "every other": a[1:, ::2].clone(),
        "wrapping": a[:, :3] * 7 + b - 300,
        "where": wg.where(a[:, 4:] > b, a[:, 4:], b),
        "cast": (a.float() * 1.5 - 200).to(wg.uint8),
        "arange": wg.arange(3, 250, 7, dtype=wg.uint8, device=device),
    }
    b[1:, ::2] = a[0, :2]
    results["written"] = b
    return {name: [t.dtype.name, t.tolist()] for name, t in results.items()}
'''


def test_uint8_results_in_the_page_as_natively(page, open_playground):
    seed = int.from_bytes(os.urandom(4), "little")
    open_playground()
    in_page = printed_json(page, PROGRAM + f"\nimport json\nprint('UINT8', json.dumps(run('webgpu', {seed})))\n",
                           "UINT8")
    native = {}
    exec(PROGRAM, native)
    assert in_page == native["run"]("cpu", seed), f"seed {seed}"
