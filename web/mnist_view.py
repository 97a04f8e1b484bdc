"""The page's MNIST view, Python side (runs in the worker, under Pyodide).

The worker hands over the four IDX files as the page decompressed them; their bytes go to GPU
buffers as they are (uint8), and batches are gathered, converted and normalised there
(webgrad.data.MNIST, shuffled by DataLoader's index tensor). A View holds the data and a Trainer:
one model with its optimizer and loader. The worker calls their methods between frames and gets
back typed arrays.
"""
import array

import weights_file
from pyodide.ffi import to_js

import webgrad as wg
import webgrad.nn.functional as F
from webgrad import nn, optim
from webgrad.data import MNIST, DataLoader
from webgrad.data.mnist_dataset import to_input
from webgrad.io import check_fits, read_idx

DEVICE = "webgpu"
EVAL_BATCH = 1000        # test images per forward pass: the CNN's activations for 10000 would take 0.5 GB


class View:
    """The data sets (on the GPU for the page's lifetime) and the Trainer the controls made."""

    def __init__(self, train_images, train_labels, test_images, test_labels):
        """The four IDX files' bytes, as JS Uint8Arrays."""
        self.train = MNIST(read_idx(train_images.to_bytes(), device=DEVICE),
                           read_idx(train_labels.to_bytes(), device=DEVICE), "train")
        self.test = MNIST(read_idx(test_images.to_bytes(), device=DEVICE),
                          read_idx(test_labels.to_bytes(), device=DEVICE), "test")
        self.trainer = None

    def configure(self, model, lr, batch_size, test_size, seed, replayed):
        """A fresh Trainer from the controls' settings."""
        self.settings = dict(lr=lr, batch_size=batch_size, test_size=test_size, seed=seed, replayed=replayed)
        self.trainer = Trainer(self.train, self.test, model, **self.settings)

    def load_weights(self, data, name):
        """A fresh Trainer of the model that a safetensors file (Uint8Array; name: the user's file
        name) holds the weights of, with those weights; returns which model ('mlp' or 'cnn'). A
        file that is not one raises ValueError saying why (no safetensors file, or made for a
        different model: the first tensor that differs), and the current Trainer stays."""
        state = weights_file.loaded(data, name, ".safetensors", DEVICE)
        # The chosen model, or the other one if the file names its tensors; check_fits says what differs.
        trainer = Trainer(self.train, self.test, self.trainer.kind, **self.settings)
        if state.keys() != trainer.model.state_dict().keys():
            other_kind = next(kind for kind in nn.models.MODELS if kind != self.trainer.kind)
            other = Trainer(self.train, self.test, other_kind, **self.settings)
            trainer = other if state.keys() == other.model.state_dict().keys() else trainer
        trainer.model.load_state_dict(check_fits(state, trainer.model, name))
        self.trainer = trainer
        return trainer.kind


class Trainer:
    """A model ('mlp' or 'cnn', as nn.models builds them) trained with Adam on shuffled batches of
    `train`, and evaluated on the first `test_size` images of `test`. replayed: each step after the
    first two replays their recorded GPU work (wg.jit), which skips Python's cost per op: several
    times the steps a second on a GPU; on a software GPU a step's time is its kernels' (bench/NOTES.md)."""

    def __init__(self, train, test, model, lr, batch_size, test_size, seed, replayed):
        wg.manual_seed(seed)
        self.kind = model
        self.model = nn.models.MODELS[model](device=DEVICE)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lr)
        self.loader = DataLoader(train, batch_size, shuffle=True, drop_last=True)
        self.batches = self._epochs()
        self.test, self.test_size = test, min(test_size, len(test))
        self.steps = 0
        self.train_step = wg.jit(self._train_step) if replayed else self._train_step

    def _epochs(self):
        while True:
            yield from self.loader

    def _train_step(self, x, y):
        """One step on a batch: its loss and its accuracy."""
        self.optimizer.zero_grad()
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        self.optimizer.step()
        return loss.detach(), (logits.detach().argmax(1) == y).float().mean()

    def step(self, count):
        """count training steps; [steps so far, their mean loss, their mean batch accuracy] as
        Float32Array (one readback for all of them)."""
        self.model.train()
        losses, hits = [], []
        for _ in range(count):
            loss, hit = self.train_step(*next(self.batches))
            losses.append(loss)
            hits.append(hit)
        loss, accuracy = wg.stack([wg.stack(losses).mean(), wg.stack(hits).mean()]).tolist()
        self.steps += count
        return to_js(array.array("f", [self.steps, loss, accuracy]))

    def evaluate(self):
        """The predicted digit of each test image, as Int32Array (the page has the labels)."""
        self.model.eval()
        predictions = array.array("i")
        with wg.no_grad():
            for start in range(0, self.test_size, EVAL_BATCH):
                x, _ = self.test[start:min(start + EVAL_BATCH, self.test_size)]
                predictions.extend(self.model(x).argmax(1).tolist())
        return to_js(predictions)

    def predict(self, pixels):
        """The 10 class probabilities for one 28x28 image (784 uint8 bytes, ink 255), as Float32Array."""
        self.model.eval()
        x = to_input(wg.frombuffer(pixels.to_bytes(), wg.uint8, device=DEVICE).reshape(1, 1, 28, 28))
        with wg.no_grad():
            return to_js(array.array("f", F.softmax(self.model(x), 1).reshape(-1).tolist()))

    def weights(self):
        """The model's state_dict as a safetensors file (wg.save's bytes), as Uint8Array."""
        return weights_file.saved(self.model.state_dict(), ".safetensors", metadata={"model": self.kind})
