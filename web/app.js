// The page: three views (tabs) over one worker. This file is the toy playground's view (controls,
// URL state, plots) and the tabs; mnist.js is the MNIST view and lm.js the language model's. Python
// and the GPU run in worker.js.
import uPlot from './uplot/uPlot.esm.js';
import { lmView } from './lm.js';
import { mnistView } from './mnist.js';
import { CHOICES, DEFAULTS, fromHash, parseHidden, scriptFor, toHash } from './script.js';
import { $, codeKeys, printTo } from './ui.js';

const COLORS = { 0: [245, 147, 34], 1: [8, 119, 189] };  // class 0 orange, class 1 blue
const GRID = 50;                                          // playground.py's GRID

// The URL hash holds the shown view's settings; "view=mnist" or "view=lm" marks another view's.
const VIEWS = ['playground', 'mnist', 'lm'];
const hashView = new URLSearchParams(location.hash.slice(1)).get('view');
let view = VIEWS.includes(hashView) ? hashView : 'playground';
let config = fromHash(view === 'playground' ? location.hash : '');
let worker = null;
let ready = false;           // the worker has Python and the GPU
let playing = false;
let points = null;           // {extent, rows: [[x, y, label, isTest]...]}
let lastProbs = null;        // the last frame's p(class 1) on the grid
let curves = [[], [], []];   // steps, training loss, test loss
let chart = null;

// ---- controls and URL

const LABELS = { sgd: 'SGD', adam: 'Adam', adamw: 'AdamW', gelu: 'GELU', relu: 'ReLU' };

function setupControls() {
  for (const [key, options] of Object.entries(CHOICES)) {
    $(key).replaceChildren(...options.map((o) => new Option(LABELS[o] ?? o, o)));
  }
  for (const key of Object.keys(DEFAULTS)) {
    $(key).addEventListener('change', () => changed(key));
    $(key).addEventListener('input', () => showRangeValues());
  }
  $('play').onclick = () => worker.postMessage({ type: 'play' });
  $('pause').onclick = () => worker.postMessage({ type: 'pause' });
  $('step').onclick = () => worker.postMessage({ type: 'step' });
  $('reset').onclick = () => worker.postMessage({ type: 'reset', play: playing });
  $('run-code').onclick = runCode;
  codeKeys($('code'), runCode);
  showConfig();
}

function showConfig() {
  for (const key of Object.keys(DEFAULTS)) $(key).value = config[key];
  $('hidden').value = config.hidden.split(',').join(', ');
  showRangeValues();
  drawNetwork();
  $('code').value = scriptFor(config);
}

function showRangeValues() {
  $('ratio-out').textContent = $('ratio').value;
  $('noise-out').textContent = $('noise').value;
  $('batch-out').textContent = $('batch').value;
}

function changed(key) {
  const input = $(key);
  if (key === 'hidden') {
    const widths = parseHidden(input.value);
    input.classList.toggle('invalid', !widths);
    if (!widths) return;
    config.hidden = widths.join(',');
  } else {
    const next = fromHash(toHash({ ...config, [key]: input.value }));  // validates like a link would
    config[key] = next[key];
  }
  history.replaceState(null, '', toHash(config));
  showConfig();
  load(scriptFor(config));
}

// Applies a script: the worker runs it as a module and Play trains what it built.
function load(source) {
  worker?.postMessage({ type: 'load', source, play: playing });  // no worker: no WebGPU, nothing to run
}

function runCode() {
  if (!worker) return;
  $('output').replaceChildren();
  setBusy(true);
  setStatus('Running your script…');
  worker.postMessage({ type: 'run', source: $('code').value });
}

function setBusy(busy) {
  for (const id of ['reset', 'step', 'run-code', 'play']) $(id).disabled = busy;
  $('pause').disabled = busy || !playing;
  if (!busy) $('play').disabled = playing;
}

function setStatus(text, kind = '') {
  $('status').textContent = text;
  $('status').className = `status ${kind}`;
}

// Python's output goes to the shown view's code panel (the MNIST view has none: the toy's).
const pythonOutput = () => $(view === 'lm' ? 'lm-output' : 'output');

// ---- messages from the worker

const handlers = {
  status: ({ text }) => setStatus(text),
  'no-webgpu': ({ reason }) => noWebGPU(reason),
  'device-lost': ({ reason }) => gpuLost(reason),
  ready({ adapter, isSoftware, loadMs }) {
    const name = adapter.name && adapter.name !== adapter.architecture ? adapter.name : `${adapter.vendor} ${adapter.architecture}`;
    $('adapter').textContent = name + (adapter.adapter_type === 'CPU' ? ' (software)' : '');
    setStatus(`Ready in ${(loadMs / 1000).toFixed(1)} s: press Play`);
    setBusy(false);
    load($('code').value);
    ready = true;
    lm.adapter(isSoftware);
    others[view]?.start();
  },
  points({ data }) {
    const [extent, nTrain] = data;
    const rows = [];
    for (let i = 2, k = 0; i < data.length; i += 3, k++) rows.push([data[i], data[i + 1], data[i + 2], k >= nTrain]);
    points = { extent, rows };
    curves = [[], [], []];
  },
  frame({ data }) {
    const [step, trainLoss, testLoss, accuracy] = data;
    $('step-count').textContent = String(step);
    $('loss').textContent = trainLoss.toFixed(3);
    $('test-loss').textContent = testLoss.toFixed(3);
    $('accuracy').textContent = accuracy.toFixed(3);
    if (curves[0].at(-1) !== step) {
      curves[0].push(step);
      curves[1].push(trainLoss);
      curves[2].push(testLoss);
      chart.setData(curves);
    }
    const layers = data[4];
    const shapes = Array.from(data.subarray(5, 5 + 2 * layers));
    let at = 5 + 2 * layers;
    lastProbs = data.subarray(at, (at += GRID * GRID));
    const weights = [];
    for (let i = 0; i < layers; i++) weights.push(data.subarray(at, (at += shapes[2 * i] * shapes[2 * i + 1])));
    drawBoundary();
    drawNetwork(shapes, weights);
  },
  state({ playing: now }) {
    playing = now;
    setBusy(false);
    setStatus(now ? 'Training…' : 'Paused');
  },
  ran({ ok }) {
    setBusy(false);
    setStatus(ok ? 'Your script ran: Play trains its model further' : 'Your script raised an error (see below)', ok ? '' : 'error');
  },
  stdout: ({ text }) => printTo(pythonOutput(), text),
  stderr: ({ text }) => printTo(pythonOutput(), text, 'note'),
  error({ text }) {
    printTo($('output'), text, 'error');   // the toy's error
    setStatus('Error: see the output under the code', 'error');
    setBusy(false);
  },
};

// The device is gone and every tensor with it: stop, say so, and offer the one way back.
function gpuLost(reason) {
  $('gpu-lost').hidden = false;
  $('gpu-lost-reason').textContent = `Reason given: ${reason}`;
  $('gpu-lost-reload').onclick = () => location.reload();
  setStatus('The GPU device was lost: reload the page', 'error');
  viewErrors('The GPU device was lost: reload the page');
  worker?.terminate();
  worker = null;
}

function noWebGPU(reason) {
  $('nogpu').hidden = false;
  $('nogpu-reason').textContent = reason;
  $('adapter').textContent = 'none';
  setStatus('No WebGPU in this browser', 'error');
  viewErrors('No WebGPU in this browser');
  worker?.terminate();
  worker = null;
}

// ---- drawing

function drawBoundary() {
  const canvas = $('boundary');
  const ctx = canvas.getContext('2d');
  const size = canvas.width;
  if (lastProbs) {
    const image = new ImageData(GRID, GRID);
    lastProbs.forEach((p, i) => image.data.set([...tint(p), 255], 4 * i));
    const small = new OffscreenCanvas(GRID, GRID);
    small.getContext('2d').putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(small, 0, 0, size, size);
  }
  if (!points) return;
  const toPx = (v) => ((v + points.extent) / (2 * points.extent)) * size;
  for (const [x, y, label, isTest] of points.rows) {
    ctx.beginPath();
    ctx.arc(toPx(x), size - toPx(y), 3.5, 0, 2 * Math.PI);
    ctx.fillStyle = `rgb(${COLORS[label]})`;
    ctx.fill();
    ctx.lineWidth = isTest ? 1.2 : 1;
    ctx.strokeStyle = isTest ? 'rgba(0, 0, 0, 0.75)' : '#fff';
    ctx.stroke();
  }
}

// p(class 1) to a colour: white at 0.5, towards a light orange (0) or light blue (1).
function tint(p) {
  const t = Math.min(1, Math.abs(2 * p - 1)) * 0.55;
  const c = COLORS[p >= 0.5 ? 1 : 0];
  return c.map((v) => Math.round(255 + (v - 255) * t));
}

// The network as columns of units; with weights (from a frame), each edge is coloured by its
// weight's sign (blue +, orange -) and drawn thicker the larger it is, as in the TF Playground.
function drawNetwork(shapes = null, weights = []) {
  const chain = shapes?.length > 0 && shapes.every((n, i) => i % 2 === 0 || i + 1 === shapes.length || n === shapes[i + 1]);
  const widths = chain ? [shapes[0], ...shapes.filter((_, i) => i % 2 === 1)] : [2, ...parseHidden(config.hidden), 2];
  if (!chain) weights = [];
  const [w, h, shown] = [300, 220, 8];
  const xs = widths.map((_, i) => 22 + (i * (w - 44)) / (widths.length - 1));
  const ys = widths.map((n) => {
    const k = Math.min(n, shown);
    return Array.from({ length: k }, (_, j) => h / 2 + (j - (k - 1) / 2) * Math.min(24, (h - 30) / k));
  });
  const biggest = Math.max(1e-6, ...weights.map((m) => m.reduce((a, v) => Math.max(a, Math.abs(v)), 0)));
  const parts = [];
  for (let i = 0; i + 1 < widths.length; i++) {
    ys[i + 1].forEach((y1, o) => ys[i].forEach((y0, j) => {
      const v = weights[i]?.[o * widths[i] + j];
      const size = Math.abs(v) / biggest;  // inline style: the stylesheet's grey would win over attributes
      const style = v === undefined ? '' : ` style="stroke: rgb(${COLORS[v >= 0 ? 1 : 0]}); stroke-width: ${(0.4 + 2.6 * size).toFixed(2)};`
        + ` opacity: ${(0.2 + 0.8 * size).toFixed(2)}"`;
      parts.push(`<line x1="${xs[i]}" y1="${y0}" x2="${xs[i + 1]}" y2="${y1}"${style}/>`);
    }));
  }
  widths.forEach((n, i) => {
    const kind = i === 0 ? 'in' : i === widths.length - 1 ? 'out' : 'hid';
    for (const y of ys[i]) parts.push(`<circle class="${kind}" cx="${xs[i]}" cy="${y}" r="7"/>`);
    if (n > shown) parts.push(`<text x="${xs[i]}" y="${h - 4}">+${n - shown}</text>`);
  });
  $('net').innerHTML = parts.join('');
  $('shape').textContent = `${widths.join(' → ')} units`;
}

function makeChart() {
  const box = $('chart');
  chart = new uPlot({
    width: box.clientWidth || 360, height: 150,
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max ?? 1, 0.05)] } },
    axes: [{ label: 'step', size: 34 }, { size: 50 }],
    legend: { live: false },
    cursor: { show: false },
    series: [{}, { label: 'training loss', stroke: '#f59322', width: 2, points: { show: false } },
             { label: 'test loss', stroke: '#0b3d63', width: 2, points: { show: false } }],
  }, curves, box);
  new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: 150 })).observe(box);
}

// ---- tabs

function showView() {
  for (const v of VIEWS) {
    $(`view-${v}`).hidden = v !== view;
    $(`tab-${v}`).setAttribute('aria-selected', String(v === view));
  }
}

// One view trains at a time: leaving one pauses it.
function switchTo(name) {
  if (name === view) return;
  if (view === 'playground' && playing) worker.postMessage({ type: 'pause' });
  others[view]?.pause();
  view = name;
  showView();
  if (name === 'playground') {
    history.replaceState(null, '', toHash(config));
  } else {
    if (ready) others[name].start();
    history.replaceState(null, '', others[name].hash());
  }
}

// ---- start

const post = (message, transfer = []) => worker?.postMessage(message, transfer);
const mnist = mnistView(post, location.hash);
const lm = lmView(post, location.hash);
const others = { mnist, lm };   // the views besides the playground: {handlers, start, pause, hash}
const viewErrors = (text) => Object.entries(others).forEach(([name, v]) => v.handlers[`${name}-error`]({ text }));
for (const v of VIEWS) $(`tab-${v}`).onclick = () => switchTo(v);
setupControls();
makeChart();
drawBoundary();
showView();
if (!navigator.gpu) {
  noWebGPU('This browser does not expose WebGPU (navigator.gpu is missing).');
} else {
  worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  worker.onmessage = ({ data }) => (handlers[data.type] ?? mnist.handlers[data.type] ?? lm.handlers[data.type])(data);
  worker.onerror = (e) => handlers.error({ text: `The worker failed: ${e.message}` });
}
