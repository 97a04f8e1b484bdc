"""The language-model half of the CLI: `python -m webgrad train gpt` trains a character-level
GPT on a corpus (names, shakespeare) or a text file, and `python -m webgrad sample FILE` continues
a prompt with a saved one. The saved file is a nanoGPT-style checkpoint in PyTorch's format:
{"model": state_dict, "model_args": GPTConfig's fields, "tokenizer": CharTokenizer's state,
"iter_num": steps, "val_loss": float}."""
import dataclasses
import math
import sys
import time

from . import nn
from .autograd import no_grad
from .backends import default_device
from .data.text import CharTokenizer, TextData
from .io import load as load_file
from .io import save as save_file
from .ops.creation import manual_seed
from .ops.generator import Generator
from .optim.lr_scheduler import LambdaLR

def warmup_cosine(steps, warmup, floor=0.1):
    """The learning rate's factor at each step (nanoGPT's schedule): linear from 1/(warmup + 1) up
    to 1 over the warmup steps, then half a cosine down to `floor` at the last step."""
    def factor(step):
        if step < warmup:
            return (step + 1) / (warmup + 1)
        progress = min(1.0, (step - warmup) / max(1, steps - 1 - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def estimate_loss(model, data, split, batch_size, block_size, batches, seed=0):
    """The mean loss over `batches` batches of a split, in eval mode, from a generator of its own
    (so the same model always gets the same estimate); one readback."""
    was_training = model.training
    model.eval()
    generator, total = Generator().manual_seed(seed), None
    with no_grad():
        for _ in range(batches):
            loss = model(*data.batch(split, batch_size, block_size, generator))[1]
            total = loss if total is None else total + loss
    model.train(was_training)
    return total.item() / batches


def train_gpt(data="names", device=None, n_layer=4, n_head=4, n_embd=128, block_size=32, batch_size=32,
              steps=1000, lr=1e-3, dropout=0.0, weight_decay=0.1, warmup=None, grad_clip=1.0, eval_batches=20,
              seed=0, save=None, root=None, progress=None):
    """Train a GPT on a corpus ('names', 'shakespeare') or a text file; returns (validation loss,
    model, tokenizer). AdamW (weight decay on the matrices), the learning rate warming up over
    `warmup` steps (default a tenth of the run, at most 100) and decaying by a cosine to lr/10,
    gradients clipped to norm grad_clip. save writes the checkpoint. progress(step, steps, loss,
    tokens_per_second) is called about 20 times (only then is the loss read back)."""
    if steps <= 0 or batch_size <= 0:
        raise ValueError("steps and batch size must be positive")
    device = device or default_device()
    manual_seed(seed)
    text = TextData.load(data, device, root=root)
    if min(text.train.shape[0], text.val.shape[0]) <= block_size:
        raise ValueError(f"{data}: its train and validation parts ({text.train.shape[0]} and {text.val.shape[0]} "
                         f"characters) must be longer than the block of {block_size}")
    config = nn.GPTConfig(block_size=block_size, vocab_size=text.tokenizer.vocab_size, n_layer=n_layer,
                          n_head=n_head, n_embd=n_embd, dropout=dropout)
    model = nn.GPT(config, device=device)
    opt = model.configure_optimizers(weight_decay, lr)
    warmup = min(100, steps // 10) if warmup is None else warmup
    schedule = LambdaLR(opt, warmup_cosine(steps, warmup))
    batches = Generator().manual_seed(seed)   # its own stream: the batches do not depend on the model's size
    every, start = max(1, steps // 20), time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        _, loss = model(*text.batch("train", batch_size, block_size, batches))
        opt.zero_grad()
        loss.backward()
        if grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        schedule.step()
        if progress and (step % every == 0 or step == steps):
            value = loss.item()   # waits for the device, so the rate below is real
            progress(step, steps, value, step * batch_size * block_size / (time.perf_counter() - start))
    val_loss = estimate_loss(model, text, "val", batch_size, block_size, eval_batches, seed)
    if save:
        save_file({"model": model.state_dict(), "model_args": dataclasses.asdict(config),
                   "tokenizer": text.tokenizer.state_dict(), "iter_num": steps, "val_loss": val_loss}, save)
    return val_loss, model, text.tokenizer


def load_gpt(path, device=None):
    """(model in eval mode on device, tokenizer) from a checkpoint that train_gpt saved."""
    checkpoint = load_file(path)
    if not isinstance(checkpoint, dict) or not {"model", "model_args", "tokenizer"} <= checkpoint.keys():
        raise ValueError(f"{path}: not a GPT checkpoint (a dict with model, model_args and tokenizer)")
    model = nn.GPT(nn.GPTConfig(**checkpoint["model_args"]), device=device or default_device())
    model.load_state_dict(checkpoint["model"])
    return model.eval(), CharTokenizer.from_state_dict(checkpoint["tokenizer"])


def sample(path, prompt="\n", tokens=200, temperature=1.0, top_k=None, device=None, seed=0):
    """The prompt followed by `tokens` characters that the saved GPT generates on device."""
    model, tokenizer = load_gpt(path, device)
    if not prompt:
        raise ValueError("the prompt must hold at least one character")
    manual_seed(seed)
    idx = tokenizer.encode_tensor(prompt, model.lm_head.weight.device).unsqueeze(0)
    out = model.generate(idx, tokens, temperature=temperature, top_k=top_k)
    return tokenizer.decode(out[0])


def add_train_options(cmd):
    """The `train gpt` options, as an argument group of the train command; dests are train_gpt's."""
    group = cmd.add_argument_group("gpt")
    group.add_argument("--data", default=None, metavar="names|shakespeare|PATH",
                       help="the corpus, or a UTF-8 text file (default: names)")
    for flag, dest, what in (("--layers", "n_layer", "transformer blocks (default 4)"),
                             ("--heads", "n_head", "attention heads (default 4)"),
                             ("--embd", "n_embd", "embedding width, a multiple of --heads (default 128)"),
                             ("--block", "block_size", "context length (default 32)")):
        group.add_argument(flag, dest=dest, type=int, metavar="N", default=None, help=what)
    group.add_argument("--dropout", type=float, default=None, help="default: 0")
    return {"data", "n_layer", "n_head", "n_embd", "block_size", "dropout"}


def add_sample_command(commands):
    cmd = commands.add_parser("sample", help="continue a prompt with a GPT that `train gpt --save` wrote")
    cmd.add_argument("file", help="the checkpoint")
    cmd.add_argument("--prompt", default="\n", help="the text to continue (default: a newline)")
    cmd.add_argument("--tokens", type=int, default=200, metavar="N", help="characters to generate (default 200)")
    cmd.add_argument("--temperature", type=float, default=1.0, help="below 1 sharpens, above 1 flattens (default 1)")
    cmd.add_argument("--top-k", type=int, default=None, metavar="K",
                     help="sample among the k likeliest characters only")
    cmd.add_argument("--device", choices=["webgpu", "cpu"], default=None)
    cmd.add_argument("--seed", type=int, default=0)


def run_sample(args, parser):
    if args.tokens <= 0:
        parser.error("--tokens must be positive")
    try:
        text = sample(args.file, args.prompt, args.tokens, args.temperature, args.top_k, args.device, args.seed)
    except FileNotFoundError as e:
        sys.stderr.write(f"python -m webgrad: {e}\n")
        return 2
    except ValueError as e:
        parser.error(str(e))
    print(text)
    return 0
