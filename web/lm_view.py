"""The page's language-model view, Python side (runs in the worker, under Pyodide).

The controls' settings become a script (script(); the code panel shows it) that reads a text,
builds a character-level GPT and its optimizer, and defines train_step(), validation_loss() and
sample(). A Session runs it, as the toy playground runs its script, and the worker calls into the
Session between chunks of steps. The page's own parts are here: the step count, the baseline of
letter frequencies, the attention maps and the weights file.
"""
import array
import dataclasses
import json
import math
import os
from collections import Counter

import weights_file
from playground import run_script
from pyodide.ffi import to_js

import webgrad as wg
import webgrad.nn.functional as F
from webgrad.data import CharTokenizer
from webgrad.io import check_fits

DEVICE = "webgpu"
SCRIPT = "lm.py"                  # the script's name in tracebacks
CUSTOM_FILE = "input.txt"         # the user's own text, in the working directory (the worker writes it)
NEEDED = ("text", "data", "config", "model", "train_step", "validation_loss", "sample")
ABOUT = {"names": "English first names, one a line", "shakespeare": "Shakespeare's plays and poems",
         "custom": f"your own text (the page saved it as {CUSTOM_FILE})"}

TEMPLATE = '''\
# A character-level GPT on {about}:
# {layers}, {heads}, width {n_embd}, a block of {block_size} characters;
# AdamW, learning rate {lr}, batches of {batch}.
# Written by the controls. Train calls train_step(); the curves and the samples
# come from validation_loss() and sample(). Run executes the file, as
# `python lm.py` would natively.
import webgrad as wg
from webgrad import nn
from webgrad.cli_gpt import estimate_loss
from webgrad.data import TextData, load_text

device = "webgpu"
wg.manual_seed({seed})
text = load_text({source})
data = TextData(text, device=device)  # the first 90% to train on, the last 10% to validate
config = nn.GPTConfig(vocab_size=data.tokenizer.vocab_size, block_size={block_size},
                      n_layer={n_layer}, n_head={n_head}, n_embd={n_embd})
model = nn.GPT(config, device=device)
optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate={lr})
batch_size = {batch}
eval_batches = 10


{replay}def train_step():
    x, y = data.batch("train", batch_size, config.block_size)
    _, loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def validation_loss():
    """The mean loss on eval_batches batches of the validation text (the same ones every time)."""
    return estimate_loss(model, data, "val", batch_size, config.block_size, batches=eval_batches)


def sample(prompt="\\n", length=200, temperature=0.8, top_k=None):
    """prompt and the length characters the model writes after it."""
    model.eval()
    idx = data.tokenizer.encode_tensor(prompt, device).unsqueeze(0)
    out = model.generate(idx, length, temperature=temperature, top_k=top_k)
    model.train()
    return data.tokenizer.decode(out[0])


if __name__ == "__main__":
    for step in range(1, {steps} + 1):
        loss = train_step()
        if step % {every} == 0 or step == {steps}:
            print(f"step {{step}}: training loss {{loss.item():.3f}}, validation loss {{validation_loss():.3f}}")
    print(sample())
'''


# How train_step runs when replayed (the settings' "replayed"): step_settings.js says why it is a choice.
REPLAY = ("# wg.jit runs the first two calls as written and records their GPU work; later\n"
          "# calls replay it, without Python's cost per op (and do not run the Python again).\n"
          "@wg.jit\n")


def script(settings):
    """The script for the controls' settings: a dict with corpus ('names', 'shakespeare' or
    'custom'), n_layer, n_head, n_embd, block_size, lr, batch, steps, every, seed and replayed."""
    s = settings
    numbers = {key: s[key] for key in ("n_layer", "n_head", "n_embd", "block_size", "lr", "batch", "steps", "every",
                                       "seed")}
    source = CUSTOM_FILE if s["corpus"] == "custom" else s["corpus"]
    return TEMPLATE.format(about=ABOUT[s["corpus"]], source=json.dumps(source), replay=REPLAY if s["replayed"] else "",
                           layers=count(s["n_layer"], "layer"), heads=count(s["n_head"], "head"), **numbers)


class Refused(ValueError):
    """What the user gave the view (a text, a weights file) cannot make a model: the page shows the
    message alone. Other errors are bugs, and it shows their type."""


class GaveUp(Exception):
    """An evaluation the page no longer wants (see Session.evaluate)."""


class Session:
    """A script's namespace (what run_script left) and the steps trained in it."""

    def __init__(self, source, run_main=False, steps=0):
        """Runs source (its main block too with run_main: the Run button); raises ValueError with
        the traceback, or naming what the view needs that the script does not define, or Refused
        when the text is too short for the model."""
        self.source = source
        self.ns, error = run_script(source, SCRIPT, "__main__" if run_main else "lm")
        if error:
            raise ValueError(error)
        absent = [name for name in NEEDED if name not in self.ns]
        if absent:
            raise ValueError(f"The script defines no {', '.join(absent)}: Train needs {', '.join(NEEDED)}.")
        self.model, self.data, self.config = self.ns["model"], self.ns["data"], self.ns["config"]
        if self.data.val.shape[0] <= self.config.block_size:
            need = 10 * (self.config.block_size + 2)
            raise Refused(f"The text is too short: {count(len(self.ns['text']), 'character')}; this model needs at "
                          f"least {need} (its last tenth, held out to validate, must be longer than a block "
                          f"of {self.config.block_size}).")
        self.steps = steps
        self.val_loss = None

    def info(self):
        """What the page shows of the session, as JSON."""
        text, tokenizer, config = self.ns["text"], self.data.tokenizer, self.config
        return json.dumps({
            "script": self.source, "vocab": tokenizer.chars, "characters": len(text),
            "train": self.data.train.shape[0], "val": self.data.val.shape[0], "baseline": unigram_entropy(text),
            "params": self.model.get_num_params(), "steps": self.steps,
            "config": {key: getattr(config, key) for key in ("n_layer", "n_head", "n_embd", "block_size")}})

    def step(self, count):
        """count training steps; [steps so far, their mean loss] as Float32Array (one readback)."""
        losses = [self.ns["train_step"]().detach() for _ in range(count)]
        loss = wg.stack(losses).mean().item()
        self.steps += count
        return to_js(array.array("f", [self.steps, loss]))

    def evaluate(self, progress):
        """[steps, the validation loss] as Float32Array, or None when the page gave up on it.

        A large model on a software GPU takes minutes over it, so the page hears how far it got:
        progress(done, total) as the script's validation_loss() draws each batch of the validation
        text (done: the batches the GPU has finished; total: the script's eval_batches, or None)
        returns whether to go on (false once the page wants a newer model)."""
        draw, drawn, training = self.data.batch, 0, self.model.training

        def watched(split, *args, **kwargs):
            nonlocal drawn
            if split == "val":
                if drawn:
                    wg.synchronize(DEVICE)   # the batches drawn before are done: the progress is real
                if not progress(drawn, self.ns.get("eval_batches")):
                    raise GaveUp
                drawn += 1
            return draw(split, *args, **kwargs)

        self.data.batch = watched
        try:
            self.val_loss = float(self.ns["validation_loss"]())
        except GaveUp:
            return None
        finally:
            del self.data.batch
            self.model.train(training)
        return to_js(array.array("f", [self.steps, self.val_loss]))

    def _prompt(self, prompt):
        """The prompt; when it is empty or holds characters the text lacks (the page names them), a
        newline (the start of a name or a line), or failing that the text's first character."""
        chars = self.data.tokenizer.chars
        if prompt and set(prompt) <= set(chars):
            return prompt
        return "\n" if "\n" in chars else chars[0]

    def sample(self, prompt, length, temperature, top_k):
        """The prompt (see _prompt) and length characters after it, as JSON {prompt, text: what the
        model wrote, steps}. top_k 0 samples from every character."""
        prompt = self._prompt(prompt)
        text = self.ns["sample"](prompt, length, temperature, top_k or None)
        return json.dumps({"prompt": prompt, "text": text[len(prompt):], "steps": self.steps})

    def attention(self, prompt):
        """The attention weights of every layer and head for the prompt's last block_size characters
        (see _prompt): {tokens, layers, heads, weights: Float32Array (layers, heads, T, T)}."""
        tokens = self._prompt(prompt)[-self.config.block_size:]
        idx = self.data.tokenizer.encode_tensor(tokens, DEVICE).unsqueeze(0)
        weights = attention_maps(self.model, idx).reshape(-1).tolist()
        return to_js({"tokens": tokens, "layers": self.config.n_layer, "heads": self.config.n_head,
                      "weights": array.array("f", weights)}, dict_converter=_js_object)

    def weights(self, corpus):
        """A checkpoint as `python -m webgrad train gpt --save` writes it (the model, its config and
        tokenizer, the step count and validation loss) and the corpus's name, as Uint8Array."""
        return weights_file.saved({"model": self.model.state_dict(), "model_args": dataclasses.asdict(self.config),
                                   "tokenizer": self.data.tokenizer.state_dict(), "iter_num": self.steps,
                                   "val_loss": self.val_loss, "corpus": corpus}, ".pt")


class View:
    """The Session the controls (or the Run button, or a weights file) made."""

    def __init__(self):
        self.session = None
        self.settings = None
        self.own_text = None   # the last text of the user's that made a model

    def configure(self, settings):
        """A fresh Session from the controls' settings (JSON, as script() takes them); its info. A
        text of the user's that makes none (Refused says why) leaves the current Session, and
        CUSTOM_FILE goes back to the last text that made one, for the next settings to use."""
        settings = json.loads(settings)
        try:
            session = Session(script(settings))
        except Refused:
            if settings["corpus"] == "custom":
                self._restore_own_text()
            raise
        if settings["corpus"] == "custom":
            self.own_text = session.ns["text"]
        self.session, self.settings = session, settings
        return session.info()

    def drop(self):
        """No Session: the page's own text is chosen and none given yet."""
        self.session = None

    def _restore_own_text(self):
        if self.own_text is None:
            os.remove(CUSTOM_FILE)
        else:
            with open(CUSTOM_FILE, "w", encoding="utf-8") as f:
                f.write(self.own_text)

    def run(self, source):
        """Runs the code panel's script as `python lm.py` would; Train then trains its model. Its
        info, or {"error": the traceback} when it raised (the current Session stays)."""
        try:
            self.session = Session(source, run_main=True)
        except ValueError as e:
            return json.dumps({"error": str(e)})
        return self.session.info()

    def load_weights(self, data, name):
        """A fresh Session for the model in a checkpoint (Uint8Array; name: the user's file name),
        with its weights, trained on the current text; its info. A file that holds no such model
        raises Refused saying why, and the current Session stays."""
        try:
            checkpoint = weights_file.loaded(data, name, ".pt", DEVICE)
        except ValueError as e:
            raise Refused(str(e)) from None
        if not isinstance(checkpoint, dict) or not {"model", "model_args", "tokenizer"} <= checkpoint.keys():
            held = ", ".join(map(str, checkpoint))[:80] if isinstance(checkpoint, dict) else type(checkpoint).__name__
            raise Refused(f"{name}: not a GPT checkpoint (a dict of model, model_args and tokenizer, as this page "
                          f"and `python -m webgrad train gpt` save it); it holds {held or 'nothing'}")
        corpus, current = checkpoint.get("corpus"), self.settings["corpus"]
        if corpus in ABOUT and corpus != current and "custom" not in (corpus, current):
            raise Refused(f"{name} was trained on {ABOUT[corpus].split(',')[0]}: choose that text first")
        try:
            chars = CharTokenizer.from_state_dict(checkpoint["tokenizer"]).chars
            size = {key: int(checkpoint["model_args"][key]) for key in ("n_layer", "n_head", "n_embd", "block_size")}
            settings = {**self.settings, **size}
            session = Session(script(settings), steps=int(checkpoint.get("iter_num") or 0))
            if chars != session.data.tokenizer.chars:
                raise ValueError(f"made for a different text: its {len(chars)} characters are not the "
                                 f"{session.data.tokenizer.vocab_size} of the text chosen here: choose that text first")
            session.model.load_state_dict(check_fits(checkpoint["model"], session.model, name))
        except ValueError as e:
            raise Refused(str(e) if str(e).startswith(name) else f"{name}: {e}") from None
        except (TypeError, KeyError, RuntimeError) as e:   # a user's file: name what is wrong
            raise Refused(f"{name} holds no GPT for this text: {e}") from None
        self.session, self.settings = session, settings
        return session.info()


def attention_maps(model, idx):
    """softmax(q k^T / sqrt(head size)) under the causal mask, of every layer and head of a GPT for
    token ids idx (1, T): (n_layer, n_head, T, T). The blocks' own modules make q and k, on the
    blocks' inputs as GPT.hidden computes them (in eval mode, no dropout)."""
    config, time = model.config, idx.shape[1]
    head = config.n_embd // config.n_head
    with wg.no_grad():
        x = model.transformer.wte(idx) + model.transformer.wpe(wg.arange(time, device=idx.device))
        future = wg.ones(time, time, device=idx.device).triu(1).bool()
        maps = []
        for block in model.transformer.h:
            q, k, _ = block.attn.c_attn(block.ln_1(x)).split(config.n_embd, dim=2)
            q, k = (t.view(1, time, config.n_head, head).transpose(1, 2) for t in (q, k))
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head)
            maps.append(F.softmax(scores.masked_fill(future, -math.inf), dim=-1))
            x = block(x)
        return wg.cat(maps)


def count(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def unigram_entropy(text):
    """The loss, in nats per character, of a model that knows only how often each character occurs."""
    n = len(text)
    return -sum(c / n * math.log(c / n) for c in Counter(text).values())


def _js_object(entries):
    from js import Object
    return Object.fromEntries(entries)
