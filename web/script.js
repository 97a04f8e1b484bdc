// The playground's settings: their choices and defaults, the URL hash that carries them, the
// Python training script they make (the code panel shows it; Play runs its train_step()), and the
// settings read back from that script once the user has edited it.
import { oneOfEach, settingsFromHash, wholeNumber } from './link_settings.js';
import { STEP_CHOICES } from './step_settings.js';

export const REGRESSION_SETS = ['plane', 'multigauss'];   // webgrad.data.toy's REGRESSION_DATASETS
export const CHOICES = {
  dataset: ['circles', 'xor', 'gaussians', 'spirals', ...REGRESSION_SETS],
  activation: ['tanh', 'relu', 'sigmoid', 'gelu'],
  optimizer: ['adam', 'adamw', 'sgd'],
  lr: ['0.001', '0.003', '0.01', '0.03', '0.1', '0.3', '1'],
  l2: ['0', '0.0001', '0.001', '0.003', '0.01', '0.03', '0.1'],
  l1: ['0', '0.0001', '0.001', '0.003', '0.01', '0.03', '0.1'],
  stepping: STEP_CHOICES,
};
// stepping: how train_step runs (step_settings.js; the other views call it step, which here is the
// Step button's id), null until the adapter is known: the script then runs its steps eagerly.
export const DEFAULTS = {
  dataset: 'circles', noise: 0, ratio: 50, batch: 16, hidden: '8,8',
  activation: 'tanh', lr: '0.03', optimizer: 'adam', l2: '0', seed: 1,
  features: 'x1,x2', l1: '0', testdata: 0, discretize: 0, stepping: null,
};
// The network's inputs (webgrad.data.toy's FEATURES): their names and labels. The points' coordinates
// are the Playground's divided by 6, so its sin x1 is sin 6x1 here.
export const FEATURES = { x1: 'x₁', x2: 'x₂', x1sq: 'x₁²', x2sq: 'x₂²', x1x2: 'x₁x₂', sinx1: 'sin 6x₁', sinx2: 'sin 6x₂' };
export const problemOf = (dataset) => (REGRESSION_SETS.includes(dataset) ? 'regression' : 'classification');

// Per data set, the settings that make it learn within a few hundred steps (choosing the set applies
// them), and why. Spirals: with sin features 16-16 tanh reaches 0.95 test accuracy in 300-600 steps
// (PyTorch, seeds 1-3), where x1, x2 alone stay near 0.6.
const SMALL = { features: 'x1,x2', hidden: '8,8', activation: 'tanh', lr: '0.03' };
export const PRESETS = {
  circles: { settings: SMALL, why: 'A disc inside a ring: two small tanh layers bend a boundary round it.' },
  xor: { settings: SMALL, why: 'Opposite corners share a class: a hidden layer combines x₁ and x₂.' },
  gaussians: { settings: SMALL, why: 'Two blobs: almost any network splits them with a straight line.' },
  spirals: { settings: { features: 'x1,x2,sinx1,sinx2', hidden: '16,16', activation: 'tanh', lr: '0.03' },
             why: 'From x₁, x₂ alone a small network cannot follow the turns: sin 6x₁ and sin 6x₂ wave at their pace.' },
  plane: { settings: { ...SMALL, hidden: '' }, why: 'The value is a tilted plane, (x₁ + x₂) / 10 on the Playground’s scale: a linear model fits it.' },
  multigauss: { settings: { ...SMALL, hidden: '16,16' },
                why: 'Six bumps of ±1: two tanh layers of 16 carve them out over a couple of thousand steps.' },
};
const POINTS = 400;
const RANGES = { noise: [0, 50], ratio: [10, 90], batch: [1, 64], seed: [0, 99999], testdata: [0, 1], discretize: [0, 1] };

// The entries of a list such as "8, 8" or "x1,x2": trimmed, the empty ones dropped.
const entries = (text) => text.split(',').map((s) => s.trim()).filter((s) => s !== '');

// Hidden layer widths from "8, 8": 0 to 6 layers of 1 to 64 units; null when malformed.
export function parseHidden(text) {
  const widths = entries(text).map(Number);
  const ok = widths.length <= 6 && widths.every((w) => Number.isInteger(w) && w >= 1 && w <= 64);
  return ok ? widths : null;
}

// Input features from "x1,x2,sinx1": one or more names of FEATURES, in FEATURES' order; null when malformed.
export function parseFeatures(text) {
  const names = entries(text);
  const ok = names.length > 0 && names.every((n) => n in FEATURES) && new Set(names).size === names.length;
  return ok ? Object.keys(FEATURES).filter((n) => names.includes(n)) : null;
}

// What a link may set each setting to (link_settings.js).
const LINK_READERS = {
  ...oneOfEach(CHOICES),
  ...Object.fromEntries(Object.entries(RANGES).map(([key, [low, high]]) => [key, wholeNumber(low, high)])),
  hidden: { read: (value) => parseHidden(value)?.join(','), allowed: 'up to 6 layers of 1 to 64 units, such as 8,8' },
  features: { read: (value) => parseFeatures(value)?.join(','), allowed: `some of ${Object.keys(FEATURES).join(', ')}` },
};

// Settings from a URL hash such as "#dataset=xor&hidden=4,4"; unknown or bad values fall back to
// defaults, each one pushed to corrections as {key, value, allowed, using} (allowed null: no such setting).
export function fromHash(hash, corrections = []) {
  return settingsFromHash(hash, DEFAULTS, LINK_READERS, corrections);
}

export function toHash(config) {
  return '#' + Object.keys(DEFAULTS).filter((k) => config[k] !== null).map((k) => `${k}=${config[k]}`).join('&');
}

const OPTIMIZERS = { adam: 'Adam', adamw: 'AdamW', sgd: 'SGD' };
// The lines over a replayed update, in web/lm_view.py's REPLAY words (tests/test_toy_steps.py checks).
// A replay runs no Python, so train_step draws each batch and hands it to the jitted update: a
// jitted train_step would replay its first batch forever.
const REPLAY = `# wg.jit runs the first two calls as written and records their GPU work; later
# calls replay it, without Python's cost per op (and do not run the Python again).
@wg.jit
`;

export function scriptFor(c) {
  const hidden = parseHidden(c.hidden);
  const regression = problemOf(c.dataset) === 'regression';
  const features = parseFeatures(c.features);
  const sizes = ['len(FEATURES)', ...hidden, regression ? 1 : 2].join(', ');
  const net = hidden.length ? `${hidden.length} hidden layer${hidden.length > 1 ? 's' : ''} (${hidden.join(', ')}), ${c.activation}`
                            : 'no hidden layer (a linear model)';
  const testRatio = Number((1 - c.ratio / 100).toFixed(2));
  const l1 = Number(c.l1) > 0;
  const [lossOf, score] = regression
    ? ['F.mse_loss(model(x)[:, 0], y)', 'test loss {test_loss(x_test, y_test):.4f}']
    : ['F.cross_entropy(model(x), y)', 'test accuracy {accuracy(x_test, y_test):.3f}'];
  const updateBody = `opt.zero_grad()
    loss = ${lossOf}${l1 ? `
    loss = loss + L1 * sum(p.abs().sum() for name, p in model.named_parameters() if name.endswith("weight"))` : ''}
    loss.backward()
    opt.step()
    return loss`;
  const trainStep = c.stepping === 'replayed' ? `${REPLAY}def update(x, y):
    ${updateBody}


def train_step():
    x, y = next(batch)  # drawn here, as replays of update() run no Python
    return update(x, y)` : `def train_step():
    x, y = next(batch)
    ${updateBody}`;
  const check = regression ? `def test_loss(x, y):
    with wg.no_grad():
        return F.mse_loss(model(features(x))[:, 0], y).item()`
    : `def accuracy(x, y):
    with wg.no_grad():
        return (model(features(x)).argmax(1) == y).float().mean().item()`;
  return `# ${c.dataset} (${problemOf(c.dataset)}): ${net}; ${OPTIMIZERS[c.optimizer]}, lr ${c.lr}.
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
# The network's inputs, computed from each point (x1, x2): see wg.data.FEATURES.
FEATURES = ${JSON.stringify(features).replaceAll(',', ', ')}


def features(x):
    return wg.data.features(x, FEATURES)


model = nn.mlp([${sizes}], activation="${c.activation}", device=device)
opt = optim.${OPTIMIZERS[c.optimizer]}(model.parameters(), lr=${c.lr}, weight_decay=${c.l2})
loader = DataLoader(TensorDataset(features(x_train), y_train), batch_size=${c.batch}, shuffle=True)
${l1 ? `L1 = ${c.l1}  # the L1 penalty's rate, on the weights
` : ''}

def batches():
    while True:  # epoch after epoch
        yield from loader


batch = batches()


${trainStep}


${check}


if __name__ == "__main__":
    for step in range(1, 301):
        loss = train_step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f}, ${score}")
`;
}

// Where scriptFor's script sets each setting: [setting, pattern, the setting from the match]. A
// Run reads them back, so that an edited script's settings show in the controls.
const NUMBER = String.raw`([-+]?[\d.]+(?:e[-+]?\d+)?)`;
const READ_BACK = [
  ['seed', /^wg\.manual_seed\((\d+)\)/m, (m) => Number(m[1])],
  ['dataset', /= wg\.data\.(\w+)\(/, (m) => m[1]],
  ['noise', new RegExp(String.raw`\bnoise=${NUMBER}`), (m) => Math.round(Number(m[1]) * 100)],
  ['ratio', new RegExp(String.raw`\btest_ratio=${NUMBER}`), (m) => Math.round((1 - Number(m[1])) * 100)],
  ['features', /^FEATURES = \[([^\]]*)\]/m, (m) => (parseFeatures(m[1].replace(/["'\s]/g, '')) ?? [NaN]).join(',')],
  ['hidden', /nn\.mlp\(\[\s*len\(FEATURES\)\s*,([\d\s,]*?),?\s*[12]\s*\]/, (m) => (parseHidden(m[1]) ?? [NaN]).join(',')],
  ['activation', /nn\.mlp\(.*\bactivation="(\w+)"/, (m) => m[1]],
  ['optimizer', /= optim\.(\w+)\(model\.parameters\(\)/, (m) => Object.keys(OPTIMIZERS).find((k) => OPTIMIZERS[k] === m[1])],
  ['lr', new RegExp(String.raw`\blr=${NUMBER}`), (m) => String(Number(m[1]))],
  ['l2', new RegExp(String.raw`\bweight_decay=${NUMBER}`), (m) => String(Number(m[1]))],
  ['l1', new RegExp(String.raw`^L1 = ${NUMBER}`, 'm'), (m) => String(Number(m[1]))],
  ['batch', /\bbatch_size=(\d+)/, (m) => Number(m[1])],
  // the step function defined first (update when replayed): replayed where wg.jit decorates it
  ['stepping', /^(@wg\.jit\n)?def (?:update|train_step)\(/m, (m) => (m[1] ? 'replayed' : 'eager')],
];

// The settings a script (scriptFor's, maybe edited) sets, over config: each one the script sets to
// a value the controls offer (a link would accept) is read back, the others keep config's value.
// matches: whether scriptFor(settings) is the script, apart from its first line (the summary).
export function configFrom(script, config) {
  const found = {};
  for (const [key, pattern, value] of READ_BACK) {
    const match = script.match(pattern);
    if (match) found[key] = value(match);
  }
  const checked = fromHash(toHash({ ...config, ...found }));
  const settings = { ...config };
  for (const key of Object.keys(found)) if (String(checked[key]) === String(found[key])) settings[key] = checked[key];
  const body = (text) => text.slice(text.indexOf('\n') + 1);
  return { settings, matches: body(scriptFor(settings)) === body(script) };
}
