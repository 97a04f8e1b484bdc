"""The page's Python side (runs in the worker, under Pyodide): it runs the code panel's script and
turns the model the script built into frames for the page.

The script is ordinary webgrad code (script.js writes it from the controls). Play and Step call the
script's `train_step()`; a frame evaluates the script's `model` once on the test set and once on
a grid over the plane, and reads all of it back in one transfer.
"""
import array
import traceback

from pyodide.ffi import to_js

import webgrad as wg
import webgrad.nn.functional as F

NEEDED = ("model", "train_step", "x_train", "y_train", "x_test", "y_test")
GRID = 50  # the decision boundary is the model evaluated on GRID x GRID points


class Session:
    def __init__(self, source, run_main=False):
        """Runs source; with run_main its `if __name__ == "__main__":` block runs too (the Run button).

        A script that raises leaves its traceback in .error; one that lacks what Play needs says so
        in .missing; .playable means neither.
        """
        self.ns, self.error = run_script(source, "train.py", "__main__" if run_main else "playground")
        self.steps = 0
        self.missing = None
        if self.error:
            return
        absent = [name for name in NEEDED if name not in self.ns]
        if absent:
            self.missing = (f"Nothing to plot: the script defines no {', '.join(absent)} (Play needs model, "
                            "train_step() and x_train, y_train, x_test, y_test).")

    @property
    def playable(self):
        return self.error is None and self.missing is None

    def points(self):
        """[extent, n_train, then x, y, label of each train point, then of each test point]; read once."""
        ns = self.ns
        rows = [(a, b, label) for x, y in ((ns["x_train"], ns["y_train"]), (ns["x_test"], ns["y_test"]))
                for (a, b), label in zip(x.tolist(), y.tolist())]
        self.extent = 1.1 * max(max(abs(a), abs(b)) for a, b, _ in rows)
        self.grid = self._grid(self.extent)
        return to_f32([self.extent, len(ns["y_train"])] + [v for row in rows for v in row])

    def _grid(self, r):
        """GRID x GRID points over [-r, r]^2, row by row from the top (y = r) down, as the canvas draws."""
        axis = [-r + 2 * r * (i + 0.5) / GRID for i in range(GRID)]
        device = self.ns["x_train"].device
        return wg.tensor([[x, y] for y in reversed(axis) for x in axis], device=device)

    def step(self, count):
        for _ in range(count):
            self.ns["train_step"]()
            self.steps += 1
        wg.synchronize()  # so that the worker's clock sees the steps' GPU time, apart from the frame's

    def frame(self):
        """One readback of everything the page draws, as float32:
        [steps, train loss, test loss, test accuracy, L, (in, out) of L weight matrices,
         p(class 1) at the GRID x GRID points, then the L weight matrices (out x in, row by row)].
        The weights are the model's 2-D parameters in order: a chain of Linear layers for an MLP."""
        ns = self.ns
        model = ns["model"]
        weights = [p for name, p in model.named_parameters() if p.ndim == 2]
        with wg.no_grad():
            train_loss = F.cross_entropy(model(ns["x_train"]), ns["y_train"])
            logits = model(ns["x_test"])
            test_loss = F.cross_entropy(logits, ns["y_test"])
            accuracy = (logits.argmax(1) == ns["y_test"]).float().mean()
            grid = model(self.grid)
            probs = (grid[:, 1] - grid[:, 0]).sigmoid()  # softmax(1)[:, 1] of 2 classes, in 2 cheap kernels
            values = wg.cat([train_loss.reshape(1), test_loss.reshape(1), accuracy.reshape(1), probs]
                            + [w.reshape(-1) for w in weights]).tolist()
        shapes = [n for w in weights for n in (w.shape[1], w.shape[0])]
        return to_f32([self.steps, *values[:3], len(weights), *shapes, *values[3:]])


def to_f32(values):
    """values as one Float32Array for the worker."""
    return to_js(array.array("f", values))


def run_script(source, filename, name):
    """Runs a code panel's script as module `name` ("__main__" runs its main block too), the file
    called filename in tracebacks: (its namespace, None) or (namespace, the traceback's text)."""
    ns = {"__name__": name}
    try:
        exec(compile(source, filename, "exec"), ns)
    except Exception as e:  # the user's code: anything can happen, and the page shows it
        return ns, error_text(e, filename)
    return ns, None


def error_text(error, filename):
    """error's traceback from the script's first frame on (the page's own frames say nothing to a user)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None and not isinstance(error, SyntaxError):
        tb = error.__traceback__
    return "".join(traceback.format_exception(type(error), error, tb))
