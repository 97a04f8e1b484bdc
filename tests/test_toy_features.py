"""The Playground's regression sets and input features (webgrad.data.toy) against NumPy, and the toy
page's frames (web/playground.py) against PyTorch: losses, score, the output on the grid, the drawn
units' values and weights."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import data
from conftest import rng, seed

SCALE = data.toy.SCALE
NUMPY_FEATURES = {
    "x1": lambda x1, x2: x1, "x2": lambda x1, x2: x2, "x1sq": lambda x1, x2: x1 ** 2, "x2sq": lambda x1, x2: x2 ** 2,
    "x1x2": lambda x1, x2: x1 * x2, "sinx1": lambda x1, x2: np.sin(6 * x1), "sinx2": lambda x1, x2: np.sin(6 * x2),
}
REGRESSIONS = [data.plane, data.multigauss]


def multigauss_values(x, y):
    """The Playground's regressGaussian labels: the bump largest in magnitude at each point."""
    bumps = np.array([[-4, 2.5, 1], [0, 2.5, -1], [4, 2.5, 1], [-4, -2.5, -1], [0, -2.5, 1], [4, -2.5, -1]])
    distance = np.hypot(x[:, None] - bumps[:, 0], y[:, None] - bumps[:, 1])
    values = bumps[:, 2] * np.clip(1 - distance / 2, 0, 1)
    return values[np.arange(len(x)), np.abs(values).argmax(1)]


def test_features_match_numpy(device):
    points = rng().uniform(-1.1, 1.1, size=(int(rng().integers(5, 40)), 2)).astype(np.float32)
    names = list(rng().permutation(list(NUMPY_FEATURES))[:int(rng().integers(1, 8))])
    got = data.features(wg.tensor(points, device=device), names).numpy()
    want = np.stack([NUMPY_FEATURES[n](points[:, 0], points[:, 1]) for n in names], 1)
    assert got.shape == (len(points), len(names))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    assert set(data.FEATURES) == set(NUMPY_FEATURES)


@pytest.mark.parametrize("names, points, message", [
    (["x1", "cos_x1"], (4, 2), "cos_x1"), ([], (4, 2), "names must be"), (["x1"], (4, 3), r"\(4, 3\)")])
def test_features_refuse_bad_input(names, points, message):
    with pytest.raises(ValueError, match=message):
        data.features(wg.zeros(*points), names)


@pytest.mark.parametrize("make", REGRESSIONS, ids=lambda f: f.__name__)
def test_regression_sets_follow_their_definitions(device, make):
    n, s = int(rng().integers(100, 300)), seed()
    split = make(n=n, seed=s, test_ratio=0.25, device=device)
    assert split.y_train.dtype is wg.float32 and split.x_train.shape == (n - round(n / 4), 2)
    assert split.y_test.shape == (round(n / 4),) and {t.device for t in split} == {device}
    x = np.concatenate([split.x_train.numpy(), split.x_test.numpy()]) * SCALE
    y = np.concatenate([split.y_train.numpy(), split.y_test.numpy()])
    assert np.abs(x).max() <= SCALE + 1e-4 and y.std() > 0.1
    want = (x[:, 0] + x[:, 1]) / 10 if make is data.plane else multigauss_values(x[:, 0], x[:, 1])
    np.testing.assert_allclose(y, want, atol=1e-5)
    assert [t.tolist() for t in make(n=n, seed=s, test_ratio=0.25, device=device)] == [t.tolist() for t in split]
    noisy = make(n=n, noise=0.5, seed=s, device=device)
    values = np.concatenate([noisy.y_train.numpy(), noisy.y_test.numpy()])
    assert np.abs(values).max() <= (1.2 * 1.5 if make is data.plane else 1) + 1e-5
    assert make.__name__ in data.REGRESSION_DATASETS and make.__name__ not in data.DATASETS


# ---- the page's frames

SCRIPT = """
import webgrad as wg
from webgrad import nn
x_train, y_train, x_test, y_test = wg.data.{dataset}(n=60, noise=0.1, seed={seed}, device="{device}")
FEATURES = {features}
def features(x):
    return wg.data.features(x, FEATURES)
model = nn.mlp([len(FEATURES), {hidden}, {out}], activation="{activation}", device="{device}")
def train_step():
    pass
"""


@pytest.fixture
def playground(page_module):
    """web/playground.py, as the page's worker runs it."""
    return page_module("playground")


def torch_twin(module):
    """The PyTorch module that computes what a webgrad Linear or Tanh does, with the same weights."""
    if isinstance(module, wg.nn.Tanh):
        return torch.nn.Tanh()
    twin = torch.nn.Linear(module.in_features, module.out_features)
    with torch.no_grad():
        twin.weight.copy_(torch.tensor(module.weight.detach().numpy()))
        twin.bias.copy_(torch.tensor(module.bias.detach().numpy()))
    return twin


@pytest.mark.parametrize("dataset", ["spirals", "multigauss"])
def test_a_frame_holds_what_the_page_draws(playground, device, dataset):
    regression = dataset == "multigauss"
    names = ["x1", "x2", "sinx1"] if regression else ["x1", "x2", "x1sq", "x2sq", "x1x2", "sinx1", "sinx2"]
    hidden = [int(rng().integers(2, 7)), 10]   # the second is wider than the diagram draws
    source = SCRIPT.format(dataset=dataset, seed=seed(), device=device, features=names, hidden=", ".join(map(str, hidden)),
                           out=1 if regression else 2, activation="tanh")
    session = playground.Session(source)
    assert session.playable, session.error or session.missing
    session.points()
    frame = np.array(session.frame(), dtype=np.float64)

    ns = session.ns
    torch_model = torch.nn.Sequential(*[torch_twin(m) for m in ns["model"]])

    def inputs(x):
        x = np.asarray(x, dtype=np.float32)
        return torch.tensor(np.stack([NUMPY_FEATURES[n](x[:, 0], x[:, 1]) for n in names], 1))

    def loss(x, y):
        out = torch_model(inputs(x.numpy()))
        if regression:
            return torch.nn.functional.mse_loss(out[:, 0], torch.tensor(y.numpy())), out
        return torch.nn.functional.cross_entropy(out, torch.tensor(y.numpy()).long()), out

    with torch.no_grad():
        train_loss, _ = loss(ns["x_train"], ns["y_train"])
        test_loss, test_out = loss(ns["x_test"], ns["y_test"])
        y_test = torch.tensor(ns["y_test"].numpy())
        score = 1 - test_loss / y_test.var(unbiased=False) if regression else \
            (test_out.argmax(1) == y_test).float().mean()
        grid = session.grid.numpy()
        columns, h = [inputs(grid)], inputs(grid)
        for module in torch_model:
            h = module(h)
            if isinstance(module, torch.nn.Tanh):
                columns.append(h)
        output = h[:, 0] if regression else torch.softmax(h, 1)[:, 1]

    shown, n_columns = int(frame[4]), int(frame[5])
    widths = [len(names), *hidden, 1 if regression else 2]
    assert shown == 8 and frame[6:6 + n_columns].tolist() == widths
    np.testing.assert_allclose(frame[1:4], [train_loss, test_loss, score], rtol=1e-4, atol=1e-5)
    at, grid_size = 6 + n_columns, playground.GRID ** 2
    np.testing.assert_allclose(frame[at:at + grid_size], output.numpy(), atol=1e-5)
    at += grid_size
    for column in columns:   # the drawn units only
        drawn = column[:, :shown].numpy()
        np.testing.assert_allclose(frame[at:at + drawn.size].reshape(drawn.shape), drawn, atol=1e-5)
        at += drawn.size
    for layer in (m for m in torch_model if isinstance(m, torch.nn.Linear)):
        drawn = layer.weight[:shown, :shown].detach().numpy()
        np.testing.assert_allclose(frame[at:at + drawn.size].reshape(drawn.shape), drawn, atol=1e-6)
        at += drawn.size
    assert at == len(frame), "the frame holds nothing else"


def test_a_model_that_is_no_chain_draws_only_its_output(playground):
    source = SCRIPT.format(dataset="xor", seed=seed(), device="cpu", features=["x1", "x2"], hidden=4, out=2,
                           activation="relu") + "model = nn.Sequential(model, nn.Identity())\n"
    session = playground.Session(source)
    session.points()
    frame = session.frame()
    assert frame[5] == 0 and len(frame) == 6 + playground.GRID ** 2
