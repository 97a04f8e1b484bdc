"""Matrix products with PyTorch's shape rules, strided operands and odd sizes, on both devices."""
import math

import numpy as np
import pytest

import webgrad as wg
from conftest import assert_close, check_op, randn, rng, wg_tensor

SHAPES = [
    ((7,), (7,)),                      # 1-D . 1-D -> 0-d
    ((5,), (5, 3)),                    # 1-D . 2-D
    ((4, 5), (5,)),                    # 2-D . 1-D
    ((17, 33), (33, 19)),              # sizes not multiples of the 16x16 tile
    ((1, 1), (1, 1)),
    ((16, 16), (16, 16)),
    ((65, 130), (130, 47)),
    ((2, 1, 3, 4), (5, 4, 6)),         # broadcast batch dims
    ((3, 4, 5), (5, 2)),               # batched @ matrix
    ((4, 5), (3, 5, 2)),               # matrix @ batched
    ((4,), (2, 4, 3)),                 # vector @ batched
    ((2, 3, 4), (4,)),                 # batched @ vector
    ((2, 3, 1, 4), (1, 3, 4, 2)),
    ((3, 0), (0, 4)),                  # empty contraction: zeros
]


@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matmul_shapes(sa, sb, device):
    check_op(lambda a, b: a @ b, randn(*sa), randn(*sb), device=device, np_fn=np.matmul)


def test_matmul_functional_and_method_forms(device):
    a, b = randn(6, 9), randn(9, 5)
    check_op(lambda x, y: wg.matmul(x, y), a, b, device=device, torch_fn=lambda x, y: x @ y)
    check_op(lambda x, y: x.matmul(y) + x.mm(y), a, b, device=device)


NON_CONTIGUOUS = {
    "a.T": ((20, 17), (20, 9), lambda a, b: a.T @ b),
    "b.T": ((17, 20), (9, 20), lambda a, b: a @ b.T),
    "both.T": ((20, 17), (9, 20), lambda a, b: a.T @ b.T),
    "mT batched": ((3, 5, 4), (3, 6, 5), lambda a, b: a.mT @ b.mT),
    "sliced": ((10, 12), (6, 7), lambda a, b: a[1::2, ::2] @ b[:, 2:]),
    "expanded": ((1, 4, 5), (3, 5, 2), lambda a, b: a.expand(3, 4, 5) @ b),
    "permuted batch": ((4, 3, 5), (3, 5, 2), lambda a, b: a.permute(1, 0, 2) @ b),
    "row of a view": ((6, 8), (8, 3), lambda a, b: a[2] @ b),
}


@pytest.mark.parametrize("name", list(NON_CONTIGUOUS))
def test_matmul_non_contiguous_operands(name, device):
    sa, sb, fn = NON_CONTIGUOUS[name]
    check_op(fn, randn(*sa), randn(*sb), device=device)


def test_matmul_random_sizes(device):
    m, k, n = (int(v) for v in rng().integers(1, 40, 3))
    batch = tuple(int(v) for v in rng().integers(1, 4, int(rng().integers(0, 3))))
    check_op(lambda a, b: a @ b, randn(*batch, m, k), randn(k, n), device=device, np_fn=np.matmul)


def test_matmul_in_a_chain(device):
    x, w1, w2 = randn(8, 5), randn(5, 16) * 0.5, randn(16, 3) * 0.5
    check_op(lambda x, a, b: ((x @ a).tanh() @ b).sum(1), x, w1, w2, device=device)


def test_matmul_same_operand_twice(device):
    check_op(lambda a: a @ a.T + a.T @ a, randn(6, 6), device=device)


def test_matmul_errors(device):
    a = wg_tensor(randn(3, 4), device)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ wg_tensor(randn(5, 2), device)
    with pytest.raises(RuntimeError):
        a @ wg_tensor(randn(3), device)
    with pytest.raises(RuntimeError):
        wg_tensor(randn(2, 3, 4), device) @ wg_tensor(randn(3, 4, 2), device)   # batch 2 vs 3
    with pytest.raises(RuntimeError):
        a @ wg_tensor(randn(), device)
    with pytest.raises(RuntimeError):
        wg.tensor([[1, 2], [3, 4]], device=device) @ wg.tensor([[1, 2], [3, 4]], device=device)
    with pytest.raises(TypeError):
        wg.matmul(a, [[1.0]] * 4)
    other = "webgpu" if device == "cpu" else "cpu"
    with pytest.raises(RuntimeError, match="cpu.*webgpu|webgpu.*cpu"):
        a @ wg_tensor(randn(4, 2), other)


def test_matmul_webgpu_matches_cpu_exactly_enough():
    a, b = randn(2, 70, 33), randn(33, 50)
    cpu = wg.tensor(a, device="cpu") @ wg.tensor(b, device="cpu")
    gpu = wg.tensor(a, device="webgpu") @ wg.tensor(b, device="webgpu")
    assert_close(gpu, cpu, atol=1e-5, rtol=1e-5, what="webgpu vs cpu matmul")


@pytest.mark.parametrize("tiles", [(16, 16, 8, 8, 8), (16, 8, 8, 8, 8), (8, 16, 8, 8, 8), (16, 16, 4, 4, 16),
                                   (8, 8, 4, 4, 16), (16, 16, 8, 16, 8)], ids=str)
@pytest.mark.parametrize("layout", ["a @ b", "a.T @ b", "a @ b.T", "a.T @ b.T"])
@pytest.mark.parametrize("sizes", ["any", "multiples of 4"])
def test_matmul_every_tile_size_and_layout(tiles, layout, sizes, monkeypatch):
    """Every tile configuration the adapter may pick, on sizes that leave partial tiles at each
    edge, with each operand staged along its contiguous dim; multiples of 4 take the vec4 loads
    (along K, or along M / N for the transposed views)."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: matmul_kernels.MatmulTiles(*tiles))
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)   # these tiles even for a small product
    m, k, n = (int(v) * (4 if sizes != "any" else 1) for v in rng().integers(1, 50 if sizes != "any" else 200, size=3))
    a = randn(k, m) if layout.startswith("a.T") else randn(m, k)
    b = randn(n, k) if layout.endswith("b.T") else randn(k, n)
    fn = {"a @ b": lambda x, y: x @ y, "a.T @ b": lambda x, y: x.T @ y,
          "a @ b.T": lambda x, y: x @ y.T, "a.T @ b.T": lambda x, y: x.T @ y.T}[layout]
    expected = fn(a.astype(np.float64), b.astype(np.float64))
    assert_close(fn(wg_tensor(a, "webgpu"), wg_tensor(b, "webgpu")).numpy(), expected,
                 atol=1e-4 * math.sqrt(k), rtol=1e-4, what=f"{layout} m={m} k={k} n={n} tiles={tiles}")


def test_matmul_vec4_loads_only_where_rows_stay_aligned(device, monkeypatch):
    # offsets 1 and 2 put rows off 16-byte boundaries: those operands must fall back to float loads
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)   # the tiled kernel's loads
    a, b = randn(37, 66), randn(64, 44)
    for da, db in [(0, 0), (1, 0), (0, 2), (2, 1)]:
        x, y = wg_tensor(a, device)[:, da:da + 64], wg_tensor(b, device)[:, db:db + 40]
        assert_close((x @ y).numpy(), a[:, da:da + 64].astype(np.float64) @ b[:, db:db + 40], atol=1e-4, rtol=1e-4)
    # transposed views, read along M (a.T) and K (b.T): the same, with the rows of the storage
    at, bt = randn(3, 64, 38), randn(3, 44, 66)
    for da, db in [(0, 0), (1, 0), (0, 2), (2, 1)]:
        x = wg_tensor(at, device)[:, :, da:da + 36].mT
        y = wg_tensor(bt, device)[:, :40, db:db + 64].mT
        expected = at[:, :, da:da + 36].transpose(0, 2, 1).astype(np.float64) @ bt[:, :40, db:db + 64].transpose(0, 2, 1)
        assert_close((x @ y).numpy(), expected, atol=1e-4, rtol=1e-4, what=f"offsets {da}, {db}")


def test_matmul_views_of_one_shape_at_other_offsets(device):
    """A product is planned once per layout of its operands and bias (shape, strides, offset): views
    of one shape at other offsets and with other strides must each get their own plan."""
    from webgrad.ops.matmul import matmul_with_bias
    a, b, bias = randn(2, 40, 24), randn(24, 48), randn(40)
    x, y, z = wg_tensor(a, device), wg_tensor(b, device), wg_tensor(bias, device)
    for i, j in [(0, 0), (1, 0), (0, 4), (1, 8), (0, 0)]:
        out = matmul_with_bias(x[i, j:j + 32, :20], y[4:, 8:], z[j:j + 32], bias_dim=-2)
        assert_close(out.numpy(), a[i, j:j + 32, :20].astype(np.float64) @ b[4:, 8:] + bias[j:j + 32, None],
                     atol=1e-4, rtol=1e-4, what=f"rows from {j} of batch {i}")
        out = x[i, j:j + 32, :20].T @ y.T[8:40, j:j + 20]   # both read through transposed views
        assert_close(out.numpy(), a[i, j:j + 32, :20].T.astype(np.float64) @ b.T[8:40, j:j + 20], atol=1e-4, rtol=1e-4)


def test_matmul_with_a_long_inner_dimension(device):
    # Software adapters cut shader loops short after ~65535 iterations: the product must not.
    a, b = randn(3, 40_000), randn(40_000, 5)
    expected = a.astype(np.float64) @ b
    assert_close((wg_tensor(a, device) @ wg_tensor(b, device)).numpy(), expected, atol=2e-3, rtol=1e-4)


def test_tile_choice_fits_the_adapter_for_any_shape():
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    for m, n, batch in [(1, 1, 1), (1, 5000, 1), (3000, 2, 1), (64, 196, 128), (4096, 4096, 1), (0, 7, 3),
                        (1152, 384, 1), (384, 1536, 1)]:
        for limit in (16384, 49152):
            tiles = matmul_kernels.matmul_tiles(m, n, batch, False, limit)
            assert tiles.workgroup_bytes <= limit and tiles.wx * tiles.wy <= 256, (m, n, batch, limit, tiles)
            # a tile's long side along the output's long side
            rows, cols = tiles.wy * tiles.tm, tiles.wx * tiles.tn
            assert rows == cols or (rows > cols) == (m > n), (m, n, tiles)
    # software: 8x8 a thread, unstaged, workgroups no larger than the table's (64 x 64, 32 x 128, 16 x 128),
    # covering each side of the output with less than a thread's 8 rows (columns) to spare a workgroup
    for m, n in [(1, 1), (16, 9), (16, 25088), (100352, 32), (33, 40), (32, 196), (128, 784), (4096, 4096), (0, 7)]:
        tiles = matmul_kernels.matmul_tiles(m, n, 1, True)
        rows, cols = tiles.wy * tiles.tm, tiles.wx * tiles.tn
        assert tiles.tm == tiles.tn == 8 and not tiles.staged and min(rows, cols) <= 64 and max(rows, cols) <= 128
        for size, side in ((max(m, 1), rows), (max(n, 1), cols)):
            workgroups = -(-size // side)
            assert side * workgroups - size < 8 * workgroups, (m, n, tiles)
    assert matmul_kernels.matmul_tiles(16, 9, 1, True)[:2] == (2, 2)   # the CNN's first weight gradient: 16 x 16


@pytest.mark.parametrize("tiles", [(16, 16, 8, 8, 8), (16, 16, 4, 4, 16), (8, 8, 4, 4, 16)], ids=str)
@pytest.mark.parametrize("bias_dim", [-1, -2])
def test_matmul_with_bias_in_the_same_kernel(tiles, bias_dim, monkeypatch):
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    from webgrad.ops.matmul import matmul_with_bias
    monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: matmul_kernels.MatmulTiles(*tiles))
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)   # these tiles even for a small product
    batch, m, k, n = 3, *(int(v) for v in rng().integers(1, 150, size=3))
    a, b, bias = randn(batch, m, k), randn(k, n), randn(n if bias_dim == -1 else m)
    along = bias if bias_dim == -1 else bias[:, None]
    expected = a.astype(np.float64) @ b + along
    x, z = wg_tensor(a, "webgpu", requires_grad=True), wg_tensor(bias, "webgpu", requires_grad=True)
    y = wg_tensor(b.T.copy(), "webgpu", requires_grad=True)   # b read through a transposed view
    out = matmul_with_bias(x, y.T, z, bias_dim)
    assert_close(out.detach().numpy(), expected, atol=1e-4, rtol=1e-4)
    g = randn(batch, m, n)
    out.backward(wg_tensor(g, "webgpu"))
    assert_close(z.grad.numpy(), g.sum((0, 2) if bias_dim == -2 else (0, 1)), atol=1e-4, rtol=1e-4)
    assert_close(x.grad.numpy(), g @ b.T, atol=1e-4, rtol=1e-4)
    assert_close(y.grad.numpy(), np.einsum("bmk,bmn->nk", a, g), atol=1e-3, rtol=1e-4)


def test_matmul_with_bias_of_an_empty_or_long_inner_dimension(device):
    from webgrad.ops.matmul import matmul_with_bias
    for k in (0, 40_000):
        a, b, bias = randn(4, k), randn(k, 3), randn(4)
        out = matmul_with_bias(wg_tensor(a, device), wg_tensor(b, device), wg_tensor(bias, device), bias_dim=-2)
        assert_close(out.numpy(), a.astype(np.float64) @ b + bias[:, None], atol=2e-3, rtol=1e-4)
    with pytest.raises(RuntimeError, match="bias"):
        matmul_with_bias(wg_tensor(randn(4, 2), device), wg_tensor(randn(2, 3), device), wg_tensor(randn(4), device))


@pytest.mark.parametrize("tiles", [(16, 16, 8, 8, 8), (8, 8, 4, 4, 16)], ids=str)
@pytest.mark.parametrize("layout", ["a @ b", "a.T @ b.T"])
def test_matmul_split_along_k_as_on_a_gpu(tiles, layout, monkeypatch):
    """A small output with a long K is cut into pieces of K summed afterwards (on a GPU, so that it
    has enough workgroups): with a batch, a bias in the first piece only, and a last piece shorter
    than the others."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    from webgrad.ops.matmul import matmul_with_bias
    monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: matmul_kernels.MatmulTiles(*tiles))
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)   # these tiles even for a small product
    gpu_rule = matmul_kernels.matmul_splits
    monkeypatch.setattr(matmul_kernels, "matmul_splits", lambda m, n, k, batch, t, is_software: gpu_rule(m, n, k, batch, t, False))
    batch, m, n = 2, *(int(v) for v in rng().integers(1, 40, size=2))
    k = int(rng().integers(1000, 3000)) * (4 if layout == "a @ b" else 1) + (0 if layout == "a @ b" else 1)
    splits = gpu_rule(m, n, k, batch, matmul_kernels.MatmulTiles(*tiles), False)
    assert 1 < splits <= matmul_kernels.MATMUL_MAX_SPLITS and k // splits >= matmul_kernels.MATMUL_MIN_SPLIT_K
    a, b, bias = randn(batch, m, k), randn(k, n), randn(n)
    x = wg_tensor(a.transpose(0, 2, 1).copy(), "webgpu").transpose(1, 2) if layout.startswith("a.T") else wg_tensor(a, "webgpu")
    y = wg_tensor(b.T.copy(), "webgpu").T if layout.endswith("b.T") else wg_tensor(b, "webgpu")
    out = matmul_with_bias(x, y, wg_tensor(bias, "webgpu"))
    assert_close(out.numpy(), a.astype(np.float64) @ b + bias, atol=1e-4 * math.sqrt(k), rtol=1e-4,
                 what=f"{layout} batch={batch} m={m} k={k} n={n} splits={splits}")


def test_matmul_splits_k_only_where_the_output_is_small():
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    for m, n, k, batch in [(128, 128, 784, 1), (128, 10, 128, 1), (4096, 4096, 4096, 1), (32, 144, 25088, 1),
                           (64, 196, 288, 128), (5, 5, 30, 1), (1152, 384, 16384, 1), (1024, 1024, 1024, 1)]:
        tiles = matmul_kernels.matmul_tiles(m, n, batch, False)
        splits = matmul_kernels.matmul_splits(m, n, k, batch, tiles, False)
        groups = -(-m // (tiles.wy * tiles.tm)) * -(-n // (tiles.wx * tiles.tn)) * batch
        assert 1 <= splits <= matmul_kernels.MATMUL_MAX_SPLITS
        assert splits == 1 or (groups < matmul_kernels.MATMUL_SPLIT_BELOW and k // splits >= matmul_kernels.MATMUL_MIN_SPLIT_K)
        if groups >= matmul_kernels.MATMUL_SPLIT_BELOW or k < matmul_kernels.MATMUL_SPLIT_FROM_K:
            assert splits == 1, (m, n, k, batch)
        else:
            assert splits > 1 and (splits == k // matmul_kernels.MATMUL_MIN_SPLIT_K
                                   or groups * splits >= matmul_kernels.MATMUL_GROUPS), (m, n, k, batch, splits)
    assert matmul_kernels.matmul_splits(3, 5, 40_000, 1, matmul_kernels.matmul_tiles(3, 5, 1, True), True) == 3   # software: short loops


@pytest.mark.parametrize("device,kernel", [("cpu", "the device's own"), ("webgpu", "the device's own"),
                                           ("webgpu", "tiled"), ("webgpu", "tiled, K in pieces")], ids=str)
def test_matmul_into_a_strided_view(device, kernel, monkeypatch):
    """The backend's matmul writes its result through a view's offset, row and batch strides (attention's
    out in torch's layout, its gradients in a split product's places), leaving the rest of the storage
    as it was: a batched product with a bias, into the heads of a (B, T, 3, H, E) tensor."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    from webgrad.backends.base import View
    if kernel != "the device's own":
        monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: matmul_kernels.MatmulTiles(4, 4, 4, 4, 8))
        monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
        monkeypatch.setattr(matmul_kernels, "matmul_splits", lambda *_: 3 if kernel.endswith("pieces") else 1)
    batch, heads, m, k, n = 2, 3, *(int(v) for v in rng().integers(5, 40, size=3))
    a, b, bias = randn(batch, heads, m, k), randn(batch, heads, k, n), randn(n)
    before = randn(batch, m, 3, heads, n)
    x, y, z, target = (wg_tensor(v, device) for v in (a, b, bias, before))
    part = int(rng().integers(0, 3))   # which of the three the product goes into
    strides = (m * 3 * heads * n, n, 3 * heads * n, 1)   # (B, H, T, E) through (B, T, 3, H, E)
    view = View(target._storage, (batch, heads, m, n), strides, part * heads * n, target.dtype)
    backend = wg.get_backend(device)
    assert backend.matmul(x._view, y._view, z._view, out=view) is target._storage
    expected = before.copy()
    expected[:, :, part] = (a.astype(np.float64) @ b + bias).transpose(0, 2, 1, 3)
    assert_close(target.numpy(), expected, atol=1e-4 * math.sqrt(k), rtol=1e-4, what=f"{kernel} m={m} k={k} n={n}")
