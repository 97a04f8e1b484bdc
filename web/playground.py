"""The page's Python side (runs in the worker, under Pyodide): it runs the code panel's script and
turns the model the script built into frames for the page.

The script is ordinary webgrad code (script.js writes it from the controls). Play and Step call the
script's `train_step()`; a frame evaluates the script's `model` on the training and test sets and
on a grid over the plane, and reads back what the page draws in one transfer. The model sees
`features(x)` of the points when the script defines that function (the Features toggles), else x.
Integer labels make a classification (cross-entropy over 2 logits), float ones a regression
(mean squared error of the first output).
"""
import array
import traceback

from pyodide.ffi import to_js

import webgrad as wg
import webgrad.nn.functional as F
from webgrad import nn

NEEDED = ("model", "train_step", "x_train", "y_train", "x_test", "y_test")
GRID = 50   # the output plot is the model evaluated on GRID x GRID points
SHOWN = 8   # units per column that the network diagram draws: a frame reads back only theirs


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
            return
        self.inputs = self.ns.get("features", lambda x: x)
        self.regression = self.ns["y_train"].dtype.is_floating_point

    @property
    def playable(self):
        return self.error is None and self.missing is None

    def points(self):
        """[extent, n_train, 1 for a regression else 0, then x, y, label (or value) of each train
        point, then of each test point]; read once."""
        ns = self.ns
        rows = [(a, b, label) for x, y in ((ns["x_train"], ns["y_train"]), (ns["x_test"], ns["y_test"]))
                for (a, b), label in zip(x.tolist(), y.tolist())]
        self.extent = 1.1 * max(max(abs(a), abs(b)) for a, b, _ in rows)
        self.grid = self._grid(self.extent)
        return to_f32([self.extent, len(ns["y_train"]), int(self.regression)] + [v for row in rows for v in row])

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
        [steps, train loss, test loss, test score (accuracy, or R^2 for a regression), SHOWN,
         C (the diagram's columns: 0 when the model is no chain of Linear layers), the C column widths,
         the output on the GRID x GRID points (p(class 1), or the value),
         then for each column but the output the drawn units' values on the grid (point by point,
         min(width, SHOWN) values each), then for each Linear layer its drawn units' weights
         (out x in, row by row)]."""
        ns, model = self.ns, self.ns["model"]
        layers = linear_chain(model)
        with wg.no_grad():
            train_loss = self.loss(model(self.inputs(ns["x_train"])), ns["y_train"])
            test_out = model(self.inputs(ns["x_test"]))
            test_loss = self.loss(test_out, ns["y_test"])
            if self.regression:
                score = 1 - test_loss / ns["y_test"].var(unbiased=False)
            else:
                score = (test_out.argmax(1) == ns["y_test"]).float().mean()
            x = self.inputs(self.grid)
            drawn = []
            if layers:
                drawn.append(x[:, :SHOWN])
                for module in model:
                    x = module(x)
                    if not isinstance(module, nn.Linear):  # an activation: a hidden column
                        drawn.append(x[:, :SHOWN])
                drawn += [layer.weight[:SHOWN, :SHOWN] for layer in layers]
            else:
                x = model(x)
            output = x[:, 0] if self.regression else (x[:, 1] - x[:, 0]).sigmoid()  # softmax(1)[:, 1] of 2
            values = wg.cat([train_loss.reshape(1), test_loss.reshape(1), score.reshape(1), output]
                            + [t.reshape(-1) for t in drawn]).tolist()
        widths = [layers[0].in_features] + [layer.out_features for layer in layers] if layers else []
        return to_f32([self.steps, *values[:3], SHOWN, len(widths), *widths, *values[3:]])

    def loss(self, output, target):
        if self.regression:
            return F.mse_loss(output[:, 0], target)
        return F.cross_entropy(output, target)


def linear_chain(model):
    """model's Linear layers when it is a Sequential of Linear layers with a parameterless module
    (an activation) between each two, as nn.mlp builds; else None (the diagram then draws no weights)."""
    if not isinstance(model, nn.Sequential) or len(model) % 2 == 0:
        return None
    modules = list(model)
    layers, between = modules[0::2], modules[1::2]
    if not all(isinstance(m, nn.Linear) for m in layers):
        return None
    if any(isinstance(m, nn.Linear) or list(m.parameters()) for m in between):
        return None
    if any(a.out_features != b.in_features for a, b in zip(layers, layers[1:])):
        return None
    return layers


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
