"""Runs one program of this folder as PyTorch code, under real torch or (with --webgrad) with
`import torch` giving webgrad, and writes what it returned as JSON.

    python run_program.py NAME OUT.json [--webgrad] [--init-out STATE.npz | --init-in STATE.npz]

The program's build() makes its model with the library's own random numbers; --init-out saves
that model's starting values and --init-in replaces them, so both libraries start from the
same weights (tests/test_programs.py runs torch first, then webgrad from torch's start). The
data comes from make_data() with a NumPy generator seeded by $PROGRAM_SEED.
"""
import argparse
import importlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def tensors_of(built):
    """The tensors that hold a program's starting values, by name."""
    if isinstance(built, (list, tuple)):
        return {str(i): t for i, t in enumerate(built)}
    return built.state_dict()


def plain(value):
    """JSON-ready: tensors as nested lists, tuples as lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("out")
    parser.add_argument("--webgrad", action="store_true")
    parser.add_argument("--init-out")
    parser.add_argument("--init-in")
    args = parser.parse_args()
    if args.webgrad:
        import webgrad.torch_alias
        webgrad.torch_alias.install()
    import torch
    sys.path.insert(0, HERE)
    program = importlib.import_module(args.name)
    torch.manual_seed(0)
    built = program.build()
    start = tensors_of(built)
    if args.init_out:
        np.savez(args.init_out, **{k: v.detach().cpu().numpy() for k, v in start.items()})
    if args.init_in:
        saved = np.load(args.init_in)
        with torch.no_grad():
            for name, t in start.items():
                t.copy_(torch.tensor(saved[name]))
    data = program.make_data(np.random.default_rng(int(os.environ.get("PROGRAM_SEED", "0"))))
    result = program.run(built, data)
    with open(args.out, "w") as f:
        json.dump(plain(result), f)


if __name__ == "__main__":
    main()
