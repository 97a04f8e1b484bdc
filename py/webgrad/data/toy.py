"""The TensorFlow Playground's 2-D data sets and input features, in pure Python.

Each generator follows the Playground's src/dataset.ts: points in about [-6, 6]^2, `noise` on its
scale (the page's slider 0..50 is noise 0..0.5). Classification sets label points 1 and 0 (the
Playground's 1 and -1); regression sets give each point a value in [-1, 1]. The points are
shuffled and split into train and test with a seeded random.Random, so a seed gives the same data
on every device; coordinates are divided by 6 so an MLP sees inputs in about [-1, 1].
"""
import array
import collections
import math
import random

from ..ops.creation import frombuffer
from ..ops.movement import cat

Split = collections.namedtuple("Split", ["x_train", "y_train", "x_test", "y_test"])
SCALE = 6.0              # the Playground draws the plane [-6, 6]^2
DATASETS = {}            # name -> classification generator, for the CLI and the page
REGRESSION_DATASETS = {}  # name -> regression generator, for the page


def _generator(points_of, registry=DATASETS, label_code="i"):
    """Turn points_of(rng, n, noise) -> [(x, y, label)] into a public, seeded, split generator that
    registry lists; its labels are stored as array code label_code ("i": int32 classes, "f": float32)."""
    def generate(n=500, noise=0.0, seed=0, test_ratio=0.5, device=None):
        if n < 2:
            raise ValueError(f"{points_of.__name__}: n must be at least 2, got {n}")
        if not 0 <= noise <= 1:
            raise ValueError(f"{points_of.__name__}: noise must be in [0, 1] (the Playground uses 0..0.5), got {noise}")
        if not 0 < test_ratio < 1:
            raise ValueError(f"{points_of.__name__}: test_ratio must be in (0, 1), got {test_ratio}")
        rng = random.Random(seed)
        points = points_of(rng, n, noise)
        rng.shuffle(points)
        n_test = min(n - 1, max(1, round(n * test_ratio)))
        train, test = points[n_test:], points[:n_test]
        return Split(*_tensors(train, label_code, device), *_tensors(test, label_code, device))

    labels = "int32 labels" if label_code == "i" else "float32 values in [-1, 1]"
    generate.__name__ = generate.__qualname__ = points_of.__name__
    generate.__doc__ = (f"{points_of.__doc__}\n\n{points_of.__name__}(n=500, noise=0.0, seed=0, test_ratio=0.5, "
                        f"device=None) -> Split(x_train, y_train, x_test, y_test): x float32 (N, 2), y {labels}.")
    registry[points_of.__name__] = generate
    return generate


def _regression(points_of):
    return _generator(points_of, REGRESSION_DATASETS, "f")


def _tensors(points, label_code, device):
    coords = array.array("f", [c / SCALE for x, y, _ in points for c in (x, y)])
    labels = array.array(label_code, [label for _, _, label in points])
    dtype = "int32" if label_code == "i" else "float32"
    return frombuffer(coords, "float32", device=device).reshape(-1, 2), frombuffer(labels, dtype, device=device)


def _halves(n):
    return n // 2, n - n // 2


@_generator
def xor(rng, n, noise):
    """Uniform points in [-5, 5]^2 pushed 0.3 away from the axes; label 1 where x * y >= 0."""
    points = []
    for _ in range(n):
        x, y = rng.uniform(-5, 5), rng.uniform(-5, 5)
        x += 0.3 if x > 0 else -0.3
        y += 0.3 if y > 0 else -0.3
        noisy_x, noisy_y = x + rng.uniform(-5, 5) * noise, y + rng.uniform(-5, 5) * noise
        points.append((x, y, int(noisy_x * noisy_y >= 0)))
    return points


@_generator
def circles(rng, n, noise):
    """A disc of radius 2.5 (label 1) inside a ring 3.5..5 (label 0); noise blurs the labels."""
    radius, points = 5.0, []
    for count, (r_min, r_max) in zip(_halves(n), ((0, radius * 0.5), (radius * 0.7, radius))):
        for _ in range(count):
            r, angle = rng.uniform(r_min, r_max), rng.uniform(0, 2 * math.pi)
            x, y = r * math.sin(angle), r * math.cos(angle)
            noisy_x, noisy_y = x + rng.uniform(-radius, radius) * noise, y + rng.uniform(-radius, radius) * noise
            points.append((x, y, int(math.hypot(noisy_x, noisy_y) < radius * 0.5)))
    return points


@_generator
def gaussians(rng, n, noise):
    """Two blobs, at (2, 2) (label 1) and (-2, -2) (label 0); variance grows from 0.5 to 4 with noise."""
    std = math.sqrt(0.5 + noise / 0.5 * 3.5)
    return [(rng.gauss(c, std), rng.gauss(c, std), label)
            for count, c, label in zip(_halves(n), (2, -2), (1, 0)) for _ in range(count)]


@_generator
def spirals(rng, n, noise):
    """Two interleaved spirals of 1.75 turns out to radius 5 (labels 1 and 0), jittered by noise."""
    points = []
    for count, delta, label in zip(_halves(n), (0, math.pi), (1, 0)):
        for i in range(count):
            r = i / count * 5
            t = 1.75 * i / count * 2 * math.pi + delta
            points.append((r * math.sin(t) + rng.uniform(-1, 1) * noise,
                           r * math.cos(t) + rng.uniform(-1, 1) * noise, label))
    return points


def _noisy_values(rng, n, noise, value_of):
    """Uniform points in [-6, 6]^2, each valued value_of(x, y) at a point moved by noise * U(-6, 6)."""
    points = []
    for _ in range(n):
        x, y = rng.uniform(-SCALE, SCALE), rng.uniform(-SCALE, SCALE)
        noisy_x, noisy_y = x + rng.uniform(-SCALE, SCALE) * noise, y + rng.uniform(-SCALE, SCALE) * noise
        points.append((x, y, value_of(noisy_x, noisy_y)))
    return points


@_regression
def plane(rng, n, noise):
    """A tilted plane: the value (x + y) / 10 at (x, y), in [-1.2, 1.2] on the plane."""
    return _noisy_values(rng, n, noise, lambda x, y: (x + y) / 10)


BUMPS = ((-4, 2.5, 1), (0, 2.5, -1), (4, 2.5, 1), (-4, -2.5, -1), (0, -2.5, 1), (4, -2.5, -1))


@_regression
def multigauss(rng, n, noise):
    """Six bumps of +-1 on a 3 x 2 grid (BUMPS: centre and sign), each falling linearly to 0 at
    distance 2; a point takes the value of the bump largest in magnitude there."""
    def value(x, y):
        values = [sign * max(0.0, 1 - math.hypot(x - cx, y - cy) / 2) for cx, cy, sign in BUMPS]
        return max(values, key=abs)
    return _noisy_values(rng, n, noise, value)


# The Playground's input features of a point (x1, x2), by name. The coordinates are the plane's
# divided by SCALE, so sin takes SCALE * x: the Playground's sin over [-6, 6], about two periods.
FEATURES = {
    "x1": lambda x1, x2: x1,
    "x2": lambda x1, x2: x2,
    "x1sq": lambda x1, x2: x1 * x1,
    "x2sq": lambda x1, x2: x2 * x2,
    "x1x2": lambda x1, x2: x1 * x2,
    "sinx1": lambda x1, x2: (SCALE * x1).sin(),
    "sinx2": lambda x1, x2: (SCALE * x2).sin(),
}


def features(x, names):
    """The network's inputs for points x (N, 2): one column per name of FEATURES, in order of names."""
    if x.ndim != 2 or x.shape[1] != 2:
        raise ValueError(f"features: x must be points of shape (N, 2), got {tuple(x.shape)}")
    unknown = [name for name in names if name not in FEATURES]
    if unknown or not names:
        raise ValueError(f"features: names must be some of {', '.join(FEATURES)}; got {list(names)}")
    x1, x2 = x[:, 0:1], x[:, 1:2]
    return cat([FEATURES[name](x1, x2) for name in names], dim=1)
