"""x[index] read and written with PyTorch's rules: boolean masks, integer index tensors and lists
(broadcast together, mixed with ints, slices, None and Ellipsis, the result's dims ordered as torch
orders them), with gradients; x[index] = value through views; index_put_. Against torch on fresh
random inputs, on both devices."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, randn, rng, tag, wg_tensor

S = slice(None)


def _index(spec, make):
    """An index spec (NumPy arrays for tensors, plain Python otherwise) with its arrays made tensors."""
    if isinstance(spec, tuple):
        return tuple(_index(s, make) for s in spec)
    return make(spec) if isinstance(spec, np.ndarray) else spec


def _read(spec):
    """fn(x, *arrays) for check_op: x[spec] with spec's arrays given as check_op inputs."""
    arrays = [s for s in (spec if isinstance(spec, tuple) else (spec,)) if isinstance(s, np.ndarray)]

    def fn(x, *tensors):
        it = iter(tensors)
        return x[_index(spec, lambda a: next(it))]
    return fn, arrays


# (shape, index) with arrays standing for index tensors; lists and ranges stay Python
READS = [
    ((5, 6), np.array([4, 0, 4, -1, -5])),                    # repeats and negatives
    ((5, 6), (S, np.array([[0, 5], [-6, 2]]))),               # a 2-D index in dim 1
    ((3, 4, 5), (0, S, [1, 2])),                              # an int first: torch selects, result (4, 2)
    ((3, 4, 5), ([0, 2], S, [1, 3])),                         # parted by a slice: the index dims go first
    ((3, 4, 5), (S, [0, 1], [1, 2])),                         # adjacent: in place
    ((3, 4, 5), (S, [0, 1], None, [1, 2])),                   # parted by None: first
    ((3, 4, 5), ([0, 1], None, [1, 2])),
    ((3, 4, 5), (None, [0, 1], [1, 2])),
    ((3, 4, 5), (Ellipsis, [0, 1])),
    ((3, 4, 5), ([[0], [2]], S, [1, 2, 3])),                  # broadcast (2, 1) with (3,)
    ((3, 4, 5), (np.array(1), S, [1, 2])),                    # a 0-d index tensor indexes like an int
    ((3, 4, 5), (S, np.array(-1), [1, 2])),
    ((3, 4, 5), (0, [1, 2], 0)),
    ((3, 4, 5), (range(1, 3), S, slice(1, None, 2))),
    ((3, 4, 5), (np.array([2, 0]), np.array([[1], [3]]), np.array([4, 0]))),
    ((3, 4), (np.array([True, False, True]),)),               # masks
    ((3, 4), (np.array([True, False, True]), slice(1, None))),
    ((3, 4, 5), (S, np.array([False, True, True, False]))),
    ((3, 4, 5), (1, np.array([False, True, True, False]), [0, 4])),
    ((3, 4, 5), (np.array([[True, False, True, True]] * 3),)),  # a 2-D mask over two dims
    ((3, 4), (np.array([False, False, False]),)),             # picks nothing
    ((3, 4), [True, False, True]),                            # a bool list is a mask
    ((3, 4), (np.array(True),)),                              # a 0-d mask adds a dim
    ((3, 4), ([[0, 1], [2, 2]], [[3], [0]])),
]


@pytest.mark.parametrize("shape,spec", READS, ids=[repr(s) for _, s in READS])
def test_read_matches_torch(shape, spec, device):
    fn, arrays = _read(spec)
    arrays = [a.astype(np.int32) if a.dtype.kind == "i" else a for a in arrays]
    check_op(fn, randn(*shape), *arrays, device=device, grad=[0])


def _random_index(shape):
    """A fresh index of shape's dims: per dim an int, a slice, an index tensor (no place picked
    twice) or a mask, None now and then."""
    picks = int(rng().integers(1, 4))   # the index tensors' length (or 1): they broadcast together
    spec = []
    for size in shape:
        kind = rng().integers(4)
        if kind == 0:
            spec.append(int(rng().integers(-size, size)))
        elif kind == 1:
            spec.append(slice(int(rng().integers(0, size)), None, int(rng().integers(1, 3))))
        elif kind == 2 or size < picks:
            count = picks if size >= picks and rng().random() < 0.7 else 1
            spec.append((rng().choice(size, count, replace=False) - size * (rng().random() < 0.5)).astype(np.int32))
        else:
            spec.append(np.isin(np.arange(size), rng().choice(size, picks, replace=False)))
        if rng().random() < 0.2:
            spec.append(None)
    return tuple(spec)


def test_random_mixed_indices(device):
    """Reads and writes of fresh index mixes: values and gradients against torch."""
    for _ in range(4):
        shape = tuple(int(s) for s in rng().integers(1, 5, int(rng().integers(2, 5))))
        spec = _random_index(shape)
        fn, arrays = _read(spec)
        check_op(fn, randn(*shape), *arrays, device=device, grad=[0], fd=False)
        picked = torch.zeros(shape)[_index(spec, torch.from_numpy)].shape
        value_shape = tuple(1 if rng().random() < 0.3 else s for s in picked[int(rng().integers(0, 2)):])

        def write(x, v, *tensors):
            it = iter(tensors)
            out = x * 1
            out[_index(spec, lambda a: next(it))] = v
            return out * out
        check_op(write, randn(*shape), randn(*value_shape), *arrays, device=device, grad=[0, 1], fd=False)


def test_read_of_a_strided_view_and_through_gather_gradients_add(device):
    x = randn(6, 5)
    check_op(lambda t, i: t.T[1:][i], x, integers(7, low=0, high=4), device=device)
    check_op(lambda t, m: t[:, 1:][m] * 3, x, rng().random((6, 4)) < 0.5, device=device, grad=[0])


def test_masked_select_broadcasts(device):
    check_op(lambda t, m: t.masked_select(m), randn(3, 4), rng().random(4) < 0.5, device=device, grad=[0])
    check_op(lambda t, m: torch_or_wg(t).masked_select(t, m), randn(3, 1), rng().random((2, 3, 4)) < 0.5,
             device=device, grad=[0])


def torch_or_wg(t):
    return wg if isinstance(t, wg.Tensor) else torch


def test_read_errors(device):
    x = wg_tensor(randn(4, 3), device)
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[wg.tensor([0.5], device=device)]
    with pytest.raises(IndexError, match=r"shape of the mask \[3\] at index 0 does not match .* at index 0"):
        x[wg.tensor([True, False, True], device=device)]
    with pytest.raises(IndexError, match="could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[[0, 4]]                       # lists are host data: checked on both devices
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [-4]]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], [0], [0]]
    with pytest.raises(TypeError):
        x["a"]


def test_out_of_range_index_tensor(device):
    """An index tensor reaching past the end raises torch's IndexError: on cpu at the op, on webgpu at
    the first read after it (its kernels check; they read and write nothing outside the tensor)."""
    x = wg_tensor(randn(4, 3), device)
    bad, columns = wg.tensor([1, 7], device=device), wg.tensor([0, 1], device=device)

    def write():
        x[bad, columns] = 5.0
        x.tolist()
    for call in (lambda: x[bad].tolist(), lambda: x[bad, columns].tolist(), write):
        with pytest.raises(IndexError, match="out of bounds"):
            call()
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 4"):
        x[bad].tolist()


# ---- basic indexing ----
INDICES = [
    1, -1, -5, slice(1, 3), slice(None, None, 2), slice(1, None, 3), slice(-3, -1), slice(5, 100), slice(4, 2),
    (1, 2), (-1, -2, -3), (slice(None), 2), (slice(1, 4), slice(None, None, 2), -2), (Ellipsis, 0),
    (0, Ellipsis), (Ellipsis,), (None,), (None, 1), (slice(None), None, slice(1, None)), (1, None, Ellipsis, None),
    (Ellipsis, None), (2, slice(None, None, 3), Ellipsis),
    (slice(None, None, 4), slice(None, None, 5), slice(None, None, 6)),
    (slice(None, 0),),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_basic_indexing(index, device):
    a = randn(5, 6, 7)
    out = check_op(lambda t: t[index], a, device=device, np_fn=lambda x: x[index])[0]
    assert out.shape == a[index].shape


def test_indexing_0d_and_1d(device):
    check_op(lambda t: t[...], randn(), device=device)
    check_op(lambda t: t[None], randn(), device=device)
    check_op(lambda t: t[3], randn(257), device=device)
    check_op(lambda t: t[-1], randn(257), device=device)
    check_op(lambda t: t[250:], randn(257), device=device)


def test_indexing_views_of_views(device):
    check_op(lambda t: t.T[1:, ::2][2][1:], randn(6, 8), device=device)
    check_op(lambda t: t[:, 1:].mT[::2, None, 1], randn(4, 5, 6), device=device)


def test_indexing_errors(device):
    x = wg_tensor(randn(5, 6), device)
    for index in (5, -6, (0, 6), (0, -7), (0, 0, 0), (Ellipsis, 1, 1, 1)):
        with pytest.raises(IndexError):
            x[index]
    with pytest.raises(IndexError):
        x[..., ...]
    with pytest.raises(ValueError):
        x[::-1]
    with pytest.raises((TypeError, IndexError)):
        x["a"]
    with pytest.raises(IndexError):
        wg_tensor(randn(), device)[0]


def test_iteration_and_len(device):
    a = randn(3, 4)
    x = wg_tensor(a, device)
    assert len(x) == 3
    for row, expected in zip(x, a):
        assert_close(row, expected)


# ---- tensor indexing ----
@pytest.mark.parametrize("index_shape", [(4,), (2, 3), (1,), (0,)])
def test_tensor_indexing(index_shape, device):
    x = randn(6, 5)
    idx = integers(*index_shape, low=0, high=6)
    check_op(lambda t, i: t[i], x, idx, device=device)


def test_tensor_indexing_repeats_accumulate_and_negative_indices(device):
    x = randn(6, 3, 2)
    idx = np.array([5, 1, 5, -1, 0, -6, 1, 1], np.int32)
    check_op(lambda t, i: t[i], x, idx, device=device)
    check_op(lambda t: t[[2, 2, 0, -2]], x, device=device)
    check_op(lambda t, i: t[i], x, np.array(int(rng().integers(-6, 6)), np.int32), device=device)   # 0-d: as an int


# ---- gather / index_select ----
@pytest.mark.parametrize("along", [2, 7])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim, along, device):
    x = randn(4, 5, 6)
    shape = [3, 4, 5]                                 # smaller than x outside `dim`
    shape[dim] = along                                # shorter, or longer (repeats), than x along `dim`
    index = integers(*shape, low=0, high=x.shape[dim])
    check_op(lambda t, i: t.gather(dim, i), x, index, device=device,
             np_fn=lambda a, i: np.take_along_axis(a[tuple(slice(0, s) if d != dim % 3 else slice(None)
                                                          for d, s in enumerate(i.shape))], i, dim))
    check_op(lambda t, i: wg.gather(t, dim, i), x, index, device=device,
             torch_fn=lambda t, i: torch.gather(t, dim, i))


def test_gather_full_shape_and_views(device):
    x = randn(6, 257)
    index = integers(6, 257, low=0, high=257)
    check_op(lambda t, i: t.gather(1, i), x, index, device=device)
    check_op(lambda t, i: t.T.gather(0, i.T), x, index, device=device)


@pytest.mark.parametrize("count", [2, 9])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select(dim, count, device):
    x = randn(4, 5, 6)
    index = integers(count, low=0, high=x.shape[dim])  # fewer or more entries (repeats) than the dim
    check_op(lambda t, i: t.index_select(dim, i), x, index, device=device,
             np_fn=lambda a, i: np.take(a, i, axis=dim))
    check_op(lambda t, i: wg.index_select(t, dim, i), x, index, device=device,
             torch_fn=lambda t, i: torch.index_select(t, dim, i))


def test_repeated_indices_accumulate_gradient(device):
    x = wg_tensor(randn(3, 4), device, requires_grad=True)
    x.index_select(0, wg.tensor([2, 0, 2, 2], device=device)).sum().backward()
    assert_close(x.grad, np.array([[1] * 4, [0] * 4, [3] * 4], np.float32), what="index_select grad")
    y = wg_tensor(randn(2, 5), device, requires_grad=True)
    y.gather(1, wg.tensor([[4, 4, 1], [0, 0, 0]], device=device)).sum().backward()
    assert_close(y.grad, np.array([[0, 1, 0, 0, 2], [3, 0, 0, 0, 0]], np.float32), what="gather grad")


def test_gather_errors(device):
    x = wg_tensor(randn(3, 4), device)
    with pytest.raises(RuntimeError):
        x.gather(1, wg.tensor([[0.0]], device=device))      # float index
    with pytest.raises(RuntimeError):
        x.gather(1, wg.tensor([0, 1], device=device))       # wrong ndim
    with pytest.raises(IndexError):
        x.gather(2, wg.tensor([[0]], device=device))
    with pytest.raises(TypeError):
        x.index_select(0, [0, 1])
    with pytest.raises(IndexError):
        x.index_select(0, wg.tensor([[0, 1]], device=device))
    with pytest.raises(RuntimeError):
        x.index_select(0, wg.tensor([0.5], device=device))


def test_out_of_range_gather_raises_on_cpu():
    x = wg_tensor(randn(3, 4), "cpu")
    with pytest.raises(IndexError):
        x.gather(1, wg.tensor([[4]], device="cpu"))


# ---- writes ----
WRITES = [
    ((4, 5), (1,), ()),                       # basic: a row
    ((4, 5), (S, 0), ()),
    ((4, 5), (S, 0), (4,)),                   # a column from a tensor
    ((4, 5), (slice(1, None, 2), slice(None, 3)), (1, 3)),
    ((3, 4, 5), (Ellipsis, 2), (4,)),         # broadcast along the leading dim
    ((3, 4, 5), (None, 1, S, -1), (1, 4)),    # a leading 1 of the value goes, as in torch
    ((4, 5), (np.array([3, 0]),), (5,)),      # index tensors and lists
    ((4, 5), ([0, 2], [1, 4]), (2,)),
    ((3, 4, 5), ([0, 2], S, [1, 3]), (2, 4)),
    ((3, 4, 5), (S, [0, 1], [1, 2]), (3, 2)),
    ((3, 4, 5), (1, [0, 3], S), ()),
    ((4, 5), (np.array([[True] * 5, [False] * 5, [True, False] * 2 + [True], [False] * 5]),), ()),  # masks
    ((4, 5), (np.array([True, False, True, True]),), (5,)),         # no size for the picked: a select
    ((4, 5), (np.array([True, False, True, True]), slice(1, 3)), (3, 2)),   # one value per picked row
    ((3, 4, 5), (S, np.array([False, True, True, False])), (3, 1, 5)),
]


@pytest.mark.parametrize("shape,spec,value_shape", WRITES, ids=[repr(s) for _, s, _ in WRITES])
def test_write_matches_torch(shape, spec, value_shape, device):
    """x[spec] = value on a non-leaf (x * 1): the values, and the gradients of x and of the value (the
    base's history rebased as torch's CopySlices does)."""
    arrays = [s for s in (spec if isinstance(spec, tuple) else (spec,)) if isinstance(s, np.ndarray)]
    arrays = [a.astype(np.int32) if a.dtype.kind == "i" else a for a in arrays]

    def fn(x, v, *tensors):
        it = iter(tensors)
        out = x * 1
        out[_index(spec, lambda a: next(it))] = v
        return out * out
    check_op(fn, randn(*shape), randn(*value_shape), *arrays, device=device, grad=[0, 1])


def test_write_a_number_and_int_and_bool_targets(device):
    a, m = randn(3, 4), rng().random((3, 4)) < 0.5
    for L, d in ((torch, "cpu"), (wg, device)):
        x = L.tensor(a, device=d)
        x[L.tensor(m, device=d)] = -2
        x[0, 1:3] = 7
        ints = L.zeros(3, 4, dtype=L.int32, device=d)
        ints[1] = 2.9                       # truncated, as copy_ converts
        ints[L.tensor(m, device=d)] = L.tensor(5.0, device=d)
        flags = L.zeros(4, dtype=L.bool, device=d)
        flags[[1, 3]] = True
        if L is torch:
            expected = (x.numpy(), ints.numpy(), flags.numpy())
        else:
            for got, want in zip((x, ints, flags), expected):
                assert_close(got, want, what="write")


def test_writes_go_through_views_to_the_base(device):
    a = randn(4, 6)
    x = wg_tensor(a, device)
    row, col, block = x[2], x[:, 1], x.view(2, 2, 6)[1, :, ::2]
    row[:] = 1.0
    col[[0, 3]] = wg_tensor(np.array([5.0, 6.0], np.float32), device)
    block[block > 1.5] = 0.0
    expected = a.copy()
    expected[2] = 1.0
    expected[[0, 3], 1] = [5.0, 6.0]
    sub = expected.reshape(2, 2, 6)[1, :, ::2]
    sub[sub > 1.5] = 0.0
    assert_close(x, expected, what="base after writes through views")
    assert_close(row, expected[2], what="the row view sees the later writes")
    assert x._version == 3 and row._version == 3, tag(f"versions {x._version}, {row._version}")


def test_write_duplicates_and_accumulate(device):
    """Repeated places: torch leaves which write wins undefined (equal values give that value);
    index_put_ with accumulate=True adds them up, with gradients."""
    a = randn(5, 3)
    x = wg_tensor(a, device)
    x[[1, 3, 1]] = 4.0
    expected = a.copy()
    expected[[1, 3]] = 4.0
    assert_close(x, expected)
    idx = np.array([4, 0, 4, 4, -1], np.int32)
    check_op(lambda t, v, i: (t * 1).index_put_((i,), v, accumulate=True),
             randn(5, 3), randn(5, 3), idx, device=device, grad=[0, 1])
    check_op(lambda t, v, i, j: (t * 1).index_put_((i, j), v, accumulate=True),
             randn(4, 3), randn(6), integers(6, low=0, high=4), integers(6, low=-3, high=3), device=device,
             grad=[0, 1])


def test_write_errors(device):
    x = wg_tensor(randn(4, 3), device)
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[2\\]"):
        x[[0, 1, 2]] = wg_tensor(randn(2), device)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x[0] = wg_tensor(randn(2, 3), device)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[wg.tensor([True, False, True, False], device=device)] = wg_tensor(randn(3, 3), device)
    with pytest.raises(IndexError, match="out of bounds"):
        x[4] = 1.0
    leaf = wg_tensor(randn(3), device, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        leaf[0] = 1.0
    for whole in (leaf > 0, slice(None), Ellipsis, [0, 2]):   # writes to the leaf itself, as torch sees them
        with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
            leaf[whole] = 1.0
    with wg.no_grad():
        leaf[0] = 1.0   # allowed, as optimizers and init do it
    assert leaf.tolist()[0] == 1.0 and leaf.is_leaf and leaf.requires_grad
