"""`python -m webgrad train {xor,circles,gaussians,spirals} [options]`: train an MLP on a
Playground set, with a progress bar on stderr and `test accuracy: 0.XXXX` as the last stdout line."""
import argparse
import sys

from . import nn, optim
from .autograd import no_grad
from .backends import default_device
from .data import DATASETS, DataLoader, TensorDataset
from .ops.creation import manual_seed

OPTIMIZERS = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}


def train(dataset="xor", device=None, hidden=(8, 8), activation="tanh", lr=0.03, optimizer="adam", steps=500,
          batch_size=32, noise=0.0, seed=0, samples=500, test_ratio=0.5, progress=None):
    """Train and return the test accuracy; progress(step, steps, loss) is called about 20 times
    (only then is the loss read back: a readback waits for the GPU)."""
    manual_seed(seed)
    data = DATASETS[dataset](samples, noise, seed, test_ratio, device)
    model = nn.mlp([2, *hidden, 2], activation, device=data.x_train.device)
    opt = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size, shuffle=True, seed=seed)
    every, step = max(1, steps // 20), 0
    while step < steps:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if progress and (step % every == 0 or step == steps):
                progress(step, steps, loss.item())
            if step == steps:
                break
    return accuracy(model, data.x_test, data.y_test)


def accuracy(model, x, y):
    """Fraction of rows of x whose highest logit is at their label y."""
    with no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def progress_bar(step, steps, loss, width=30):
    done = step * width // steps
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] step {step}/{steps}  loss {loss:.4f}")
    if step == steps:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _sizes(text):
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        sizes = (0,)
    if any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of positive layer sizes, got {text!r}")
    return sizes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m webgrad", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("train", help="train an MLP on one of the TensorFlow Playground's 2-D sets")
    cmd.add_argument("dataset", choices=list(DATASETS))
    cmd.add_argument("--device", choices=["webgpu", "cpu"], default=None,
                     help="default: webgpu on a hardware adapter, else cpu (WEBGRAD_DEVICE overrides)")
    cmd.add_argument("--hidden", type=_sizes, default=(8, 8), help="hidden layer sizes, e.g. 8,8 (default)")
    cmd.add_argument("--activation", choices=list(nn.ACTIVATIONS), default="tanh")
    cmd.add_argument("--lr", type=float, default=0.03)
    cmd.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam")
    cmd.add_argument("--steps", type=int, default=500)
    cmd.add_argument("--batch-size", type=int, default=32)
    cmd.add_argument("--noise", type=float, default=0.0, help="the Playground's noise, 0..0.5")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--samples", type=int, default=500, help="points in train + test")
    cmd.add_argument("--test-ratio", type=float, default=0.5)
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k != "command"}
    options["device"] = args.device or default_device()
    if args.steps <= 0:
        parser.error("--steps must be positive")
    try:
        acc = train(**options, progress=progress_bar)
    except ValueError as e:
        parser.error(str(e))
    print(f"test accuracy: {acc:.4f}")
    return 0
