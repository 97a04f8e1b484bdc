"""`python -m webgrad train {xor,circles,gaussians,spirals,mnist,gpt} [options]`: train an MLP on a
Playground set, an MLP or a CNN on MNIST, or a GPT on text, with a progress bar on stderr and
`test accuracy: 0.XXXX` (`val loss: X.XXXX` for the GPT) as the last stdout line;
`python -m webgrad sample FILE`: continue a prompt with a saved GPT (cli_gpt.py)."""
import argparse
import sys
import time

from . import cli_gpt, nn, optim
from .autograd import no_grad
from .backends import default_device
from .data import DATASETS, DataLoader, TensorDataset
from .data.mnist_dataset import mnist
from .io import save as save_tensors
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


# ---- MNIST ----
# The recipe behind the targets (MLP >= 0.975, CNN >= 0.988 after 3 epochs): Adam, batch 64, the
# learning rate decaying linearly from its start to 0 over the run.
MNIST_DEFAULTS = {"epochs": 3, "batch_size": 64, "lr": 2e-3, "optimizer": "adam", "schedule": "linear"}


def evaluate(model, dataset, batch_size=1000):
    """Test accuracy of model on a dataset of (images, labels), in eval mode, batch by batch
    (the counts are summed on the device; one readback at the end)."""
    was_training = model.training
    model.eval()
    correct = None
    with no_grad():
        for x, y in DataLoader(dataset, batch_size):
            hits = (model(x).argmax(1) == y).int().sum()
            correct = hits if correct is None else correct + hits
    model.train(was_training)
    return correct.item() / len(dataset) if correct is not None else float("nan")


def train_mnist(model="mlp", device=None, epochs=3, batch_size=64, lr=2e-3, optimizer="adam", schedule="linear",
                seed=0, limit=None, test_limit=None, steps=None, root=None, download=False, save=None,
                progress=None, model_kwargs=None):
    """Train nn.mnist_mlp or nn.mnist_cnn on MNIST and return (test accuracy, model).

    limit / test_limit keep the first examples of each split; steps stops early. schedule
    'linear' decays the learning rate to 0 over the run, 'constant' keeps it. save writes
    wg.save(model.state_dict(), save). progress(epoch, epochs, step, steps_per_epoch, loss,
    images_per_second) is called about 50 times an epoch (only then is the loss read back)."""
    if model not in nn.MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(nn.MODELS)}")
    if schedule not in ("linear", "constant"):
        raise ValueError(f"unknown schedule {schedule!r}; choose linear or constant")
    if epochs <= 0 or batch_size <= 0:
        raise ValueError("epochs and batch size must be positive")
    device = device or default_device()
    manual_seed(seed)
    train_set = mnist("train", root, device, limit, download=download)
    test_set = mnist("test", root, device, test_limit, download=download)
    net = nn.MODELS[model](device=device, **(model_kwargs or {}))
    opt = OPTIMIZERS[optimizer](net.parameters(), lr=lr)
    loader = DataLoader(train_set, batch_size, shuffle=True, seed=seed)
    per_epoch = len(loader)
    total = per_epoch * epochs if steps is None else min(steps, per_epoch * epochs)
    every, step, seen, start = max(1, per_epoch // 50), 0, 0, time.perf_counter()
    net.train()
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step, seen = step + 1, seen + x.shape[0]
            if schedule == "linear":
                for group in opt.param_groups:
                    group["lr"] = lr * (1 - step / total)
            if progress and ((i + 1) % every == 0 or i + 1 == per_epoch or step == total):
                value = loss.item()   # waits for the device, so the rate below is real
                progress(epoch + 1, epochs, i + 1, per_epoch, value, seen / (time.perf_counter() - start))
            if step == total:
                break
        if step == total:
            break
    acc = evaluate(net, test_set)
    if save:
        # safetensors files carry a metadata header; PyTorch's format has none
        safetensors = str(save).lower().endswith(".safetensors")
        metadata = {"model": model, "test_accuracy": f"{acc:.4f}"} if safetensors else None
        save_tensors(net.state_dict(), save, metadata=metadata)
    return acc, net


def _bar(step, steps, before, after, width=30):
    """One line on stderr, written over at each call: before, a bar of the steps done, after; a
    newline once the last step is done."""
    done = step * width // steps
    sys.stderr.write(f"\r{before}[{'#' * done}{'.' * (width - done)}] {after}")
    if step == steps:
        sys.stderr.write("\n")
    sys.stderr.flush()


def progress_bar(step, steps, loss):
    _bar(step, steps, "", f"step {step}/{steps}  loss {loss:.4f}")


def mnist_progress_bar(epoch, epochs, step, steps, loss, rate):
    _bar(step, steps, f"epoch {epoch}/{epochs} ", f"{step}/{steps}  loss {loss:.4f}  {rate:,.0f} img/s ")


def gpt_progress_bar(step, steps, loss, rate):
    _bar(step, steps, "", f"step {step}/{steps}  loss {loss:.4f}  {rate:,.0f} tok/s ")


def _sizes(text):
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        sizes = (0,)
    if any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of positive layer sizes, got {text!r}")
    return sizes


TOY_OPTIONS = {"hidden": (8, 8), "activation": "tanh", "noise": 0.0, "samples": 500, "test_ratio": 0.5}
MNIST_OPTIONS = {"model": "mlp", "epochs": 3, "limit": None, "test_limit": None, "save": None, "root": None,
                 "download": False, "schedule": "linear"}
GPT_FLAGS = {"n_layer": "layers", "n_head": "heads", "n_embd": "embd", "block_size": "block"}


def _misplaced(given, kind, owners):
    """'--a, --b: only for X' for the given options that belong to other kinds of training than kind."""
    wrong = {}
    for name in sorted(given):
        takers = [k for k, names in owners.items() if name in names]
        if takers and kind not in takers:
            wrong.setdefault(" and ".join(takers), []).append("--" + GPT_FLAGS.get(name, name).replace("_", "-"))
    return "; ".join(f"{', '.join(flags)}: only for {takers}" for takers, flags in wrong.items())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m webgrad", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("train", help="train an MLP on one of the TensorFlow Playground's 2-D sets, "
                                            "an MLP or a CNN on MNIST, or a GPT on text")
    cmd.add_argument("dataset", choices=[*DATASETS, "mnist", "gpt"])
    cmd.add_argument("--device", choices=["webgpu", "cpu"], default=None,
                     help="default: webgpu on a hardware adapter, else cpu (WEBGRAD_DEVICE overrides)")
    cmd.add_argument("--lr", type=float, default=None, help="default: 0.03 (toy sets), 0.002 (mnist), 0.001 (gpt)")
    cmd.add_argument("--optimizer", choices=list(OPTIMIZERS), default=None,
                     help="default: adam (the GPT always trains with AdamW)")
    cmd.add_argument("--batch-size", type=int, default=None, help="default: 32 (toy sets, gpt), 64 (mnist)")
    cmd.add_argument("--steps", type=int, default=None,
                     help="default: 500 (toy sets), 1000 (gpt); on mnist, stop early")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--save", metavar="PATH", default=None,
                     help="mnist: write the trained state_dict, safetensors for a .safetensors path, else "
                          "PyTorch's format; gpt: write a checkpoint (weights, config, tokenizer) for `sample`")
    toy = cmd.add_argument_group("toy sets")
    toy.add_argument("--hidden", type=_sizes, default=None, help="hidden layer sizes, e.g. 8,8 (default)")
    toy.add_argument("--activation", choices=list(nn.ACTIVATIONS), default=None, help="default: tanh")
    toy.add_argument("--noise", type=float, default=None, help="the Playground's noise, 0..0.5")
    toy.add_argument("--samples", type=int, default=None, help="points in train + test (default 500)")
    toy.add_argument("--test-ratio", type=float, default=None, help="default: 0.5")
    digits = cmd.add_argument_group("mnist")
    digits.add_argument("--model", choices=list(nn.MODELS), default=None, help="default: mlp")
    digits.add_argument("--epochs", type=int, default=None, help="default: 3")
    digits.add_argument("--limit", type=int, default=None, help="train on the first N training images")
    digits.add_argument("--test-limit", type=int, default=None, help="test on the first N test images")
    digits.add_argument("--schedule", choices=["linear", "constant"], default=None,
                        help="learning rate: linear decay to 0 (default) or constant")
    digits.add_argument("--root", metavar="DIR", default=None, help="directory of the MNIST IDX files")
    digits.add_argument("--download", action="store_true", default=None,
                        help="fetch the MNIST files (checksummed) into ~/.cache/webgrad/mnist if missing")
    gpt_options = cli_gpt.add_train_options(cmd)
    cli_gpt.add_sample_command(commands)
    args = parser.parse_args(argv)
    if args.command == "sample":
        return cli_gpt.run_sample(args, parser)
    given = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    device = args.device or default_device()
    kind = args.dataset if args.dataset in ("mnist", "gpt") else "the toy sets"
    wrong = _misplaced(given, kind, {"the toy sets": {*TOY_OPTIONS, "optimizer"},
                                     "mnist": {*MNIST_OPTIONS, "optimizer"}, "gpt": {*gpt_options, "save"}})
    if wrong:
        parser.error(wrong)
    for name in ("steps", "batch_size", "epochs", "limit", "test_limit", "samples", *GPT_FLAGS):
        if name in given and given[name] <= 0:
            parser.error(f"--{GPT_FLAGS.get(name, name).replace('_', '-')} must be positive")
    try:
        if kind == "gpt":
            options = {**given, "device": device}
            options.pop("dataset")
            val_loss, _, _ = cli_gpt.train_gpt(**options, progress=gpt_progress_bar)
            if args.save:
                sys.stderr.write(f"saved the GPT checkpoint to {args.save}\n")
            print(f"val loss: {val_loss:.4f}")
            return 0
        if kind == "mnist":
            options = {**MNIST_DEFAULTS, **MNIST_OPTIONS, **given, "device": device}
            options.pop("dataset")
            acc, _ = train_mnist(**options, progress=mnist_progress_bar)
            if args.save:
                sys.stderr.write(f"saved the {options['model']} state_dict to {args.save}\n")
        else:
            options = {"steps": 500, "batch_size": 32, "lr": 0.03, **TOY_OPTIONS, **given, "device": device}
            acc = train(**options, progress=progress_bar)
    except FileNotFoundError as e:
        sys.stderr.write(f"python -m webgrad: {e}\n")
        return 2
    except ValueError as e:
        parser.error(str(e))
    print(f"test accuracy: {acc:.4f}")
    return 0
