// The playground's settings: their choices and defaults, the URL hash that carries them, and the
// Python training script they make (the code panel shows it; Play runs its train_step()).

export const CHOICES = {
  dataset: ['circles', 'xor', 'gaussians', 'spirals'],
  activation: ['tanh', 'relu', 'sigmoid', 'gelu'],
  optimizer: ['adam', 'adamw', 'sgd'],
  lr: ['0.001', '0.003', '0.01', '0.03', '0.1', '0.3', '1'],
  l2: ['0', '0.0001', '0.001', '0.003', '0.01', '0.03', '0.1'],
};
export const DEFAULTS = {
  dataset: 'circles', noise: 0, ratio: 50, batch: 16, hidden: '8,8',
  activation: 'tanh', lr: '0.03', optimizer: 'adam', l2: '0', seed: 1,
};
const POINTS = 400;
const RANGES = { noise: [0, 50], ratio: [10, 90], batch: [1, 64], seed: [0, 99999] };

// Hidden layer widths from "8, 8": 0 to 6 layers of 1 to 64 units; null when malformed.
export function parseHidden(text) {
  const parts = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const widths = parts.map(Number);
  const ok = widths.length <= 6 && widths.every((w) => Number.isInteger(w) && w >= 1 && w <= 64);
  return ok ? widths : null;
}

// Settings from a URL hash such as "#dataset=xor&hidden=4,4"; unknown or bad values fall back to defaults.
export function fromHash(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const config = { ...DEFAULTS };
  for (const [key, value] of params) {
    if (!(key in DEFAULTS)) continue;
    if (CHOICES[key]) {
      if (CHOICES[key].includes(value)) config[key] = value;
    } else if (RANGES[key]) {
      const [lo, hi] = RANGES[key];
      const n = Number(value);
      if (Number.isInteger(n) && n >= lo && n <= hi) config[key] = n;
    } else if (key === 'hidden' && parseHidden(value)) {
      config.hidden = parseHidden(value).join(',');
    }
  }
  return config;
}

export function toHash(config) {
  return '#' + Object.keys(DEFAULTS).map((k) => `${k}=${config[k]}`).join('&');
}

const OPTIMIZERS = { adam: 'Adam', adamw: 'AdamW', sgd: 'SGD' };

export function scriptFor(c) {
  const hidden = parseHidden(c.hidden);
  const sizes = [2, ...hidden, 2];
  const net = hidden.length ? `${hidden.length} hidden layer${hidden.length > 1 ? 's' : ''} (${hidden.join(', ')}), ${c.activation}`
                            : 'no hidden layer (a linear model)';
  const testRatio = Number((1 - c.ratio / 100).toFixed(2));
  return `# ${c.dataset}: ${net}; ${OPTIMIZERS[c.optimizer]}, lr ${c.lr}.
# Written by the controls. Play and Step call train_step() and draw the
# model; Run executes the file, as \`python train.py\` would natively.
import webgrad as wg
from webgrad import nn, optim
from webgrad.data import DataLoader, TensorDataset
import webgrad.nn.functional as F

device = "webgpu"
wg.manual_seed(${c.seed})
x_train, y_train, x_test, y_test = wg.data.${c.dataset}(
    n=${POINTS}, noise=${c.noise / 100}, test_ratio=${testRatio}, seed=${c.seed}, device=device)
model = nn.mlp(${JSON.stringify(sizes).replaceAll(',', ', ')}, activation="${c.activation}", device=device)
opt = optim.${OPTIMIZERS[c.optimizer]}(model.parameters(), lr=${c.lr}, weight_decay=${c.l2})
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=${c.batch}, shuffle=True)


def batches():
    while True:  # epoch after epoch
        yield from loader


batch = batches()


def train_step():
    x, y = next(batch)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def accuracy(x, y):
    with wg.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


if __name__ == "__main__":
    for step in range(1, 301):
        loss = train_step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f}, test accuracy {accuracy(x_test, y_test):.3f}")
`;
}
