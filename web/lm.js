// The language-model view: train a character-level GPT on a text (first names, Shakespeare, or the
// user's own), watch its training and validation loss, read samples that improve as it learns,
// continue a prompt, look at where each attention head looks, and download or load its weights.
// Python and the GPU run in worker.js (web/lm_view.py); this is the page side.
import uPlot from './uplot/uPlot.esm.js';
import { $, codeKeys, printTo, saveFile, showBusy, showStatus, takeFile } from './ui.js';

// Model sizes, named on the page in words; the two smaller ones suit a software GPU.
export const SIZES = {
  tiny: { n_layer: 1, n_head: 2, n_embd: 32, block_size: 16 },
  small: { n_layer: 2, n_head: 4, n_embd: 64, block_size: 32 },
  medium: { n_layer: 4, n_head: 4, n_embd: 128, block_size: 64 },
  large: { n_layer: 6, n_head: 6, n_embd: 192, block_size: 128 },
};
const FAST_ON_SOFTWARE = ['tiny', 'small'];
export const LM_CHOICES = {
  corpus: ['names', 'shakespeare', 'custom'],
  size: Object.keys(SIZES),
  lr: ['0.0003', '0.001', '0.003', '0.01'],
  batch: ['16', '32', '64'],
  steps: ['50', '100', '200', '500', '1000', '2000', '5000'],
  every: ['25', '50', '100', '200', '500'],
  topk: ['0', '1', '3', '5', '10', '20'],
};
// size and prompt: null until known (the adapter's size, the corpus's prompt).
const DEFAULTS = { corpus: 'names', size: null, lr: '0.003', batch: '32', steps: '500', every: '100', seed: 1,
                   temperature: 0.8, topk: '0', prompt: null };
const PROMPTS = { names: 'Emma\nOli', shakespeare: 'ROMEO:\nBut, soft! what light', custom: '' };
const LABELS = { names: 'English first names', shakespeare: 'Shakespeare', custom: 'Your own text', 0: 'all' };
const MAX_PROMPT = 200;
const MAX_TEXT = 20e6;   // characters of the user's own text
// The attention heat map's colour scale, from weight 0 to 1 (light to dark blue).
const SCALE = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
// A character as the page shows it: newlines, spaces and tabs would be invisible.
const shown = (c) => ({ '\n': '↵', ' ': '␣', '\t': '⇥' })[c] ?? c;

export function sizeLabel(c) {
  const s = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${s(c.n_layer, 'layer')}, ${s(c.n_head, 'head')}, width ${c.n_embd}, block ${c.block_size}`;
}

// Settings from a URL hash such as "#view=lm&corpus=shakespeare&size=small"; bad values fall back to defaults.
export function lmFromHash(hash) {
  const settings = { ...DEFAULTS };
  for (const [key, value] of new URLSearchParams(hash.replace(/^#/, ''))) {
    if (LM_CHOICES[key]?.includes(value)) settings[key] = value;
    else if (key === 'seed' && /^\d{1,5}$/.test(value)) settings.seed = Number(value);
    else if (key === 'temperature' && validTemperature(Number(value))) settings.temperature = Number(value);
    else if (key === 'prompt' && value.length <= MAX_PROMPT) settings.prompt = value;
  }
  return settings;
}

const validTemperature = (t) => t >= 0.1 && t <= 2 && Math.abs(t * 10 - Math.round(t * 10)) < 1e-9;

export function lmToHash(settings) {
  const params = new URLSearchParams({ view: 'lm' });
  for (const key of Object.keys(DEFAULTS)) if (settings[key] !== null) params.set(key, settings[key]);
  return '#' + params.toString();
}

// The view; post sends a message to the worker. Returns {handlers (for the worker's lm-* messages),
// adapter(isSoftware) (once the worker knows it), start() (once the worker is ready), pause(), hash()}.
export function lmView(send, initialHash) {
  const settings = lmFromHash(initialHash);
  settings.prompt ??= PROMPTS[settings.corpus];
  // Every message carries the sampling settings: the worker's samples follow the controls.
  const post = (message, transfer) => send({ ...message, sampling: samplingMessage() }, transfer);
  let isSoftware = false;
  let started = false;
  let training = false;
  let plan = 0;
  let info = null;            // the worker's account of the model: lm_view.Session.info
  let loaded = null;          // the model size of a weights file or a script that is none of SIZES, and {from}
  let curves = [[], [], [], []];  // steps, training loss, validation loss, the letter-frequency baseline
  let chart = null;
  let maps = null;            // {tokens, layers, heads, weights: Float32Array (layers, heads, T, T)}
  let promptTimer = 0;

  // ---- controls

  for (const key of ['corpus', 'lr', 'batch', 'steps', 'every', 'topk']) {
    $(`lm-${key}`).replaceChildren(...LM_CHOICES[key].map((o) => new Option(LABELS[o] ?? o, o)));
  }
  showSizes();
  for (const key of ['corpus', 'size', 'lr', 'batch', 'steps', 'seed', 'every', 'topk', 'temperature']) {
    $(`lm-${key}`).value = settings[key];
    $(`lm-${key}`).addEventListener('change', () => changed(key));
  }
  $('lm-temperature').addEventListener('input', showTemperature);
  $('lm-prompt').value = settings.prompt;
  $('lm-prompt').addEventListener('input', promptChanged);
  $('lm-train').onclick = () => post({ type: 'lm-train', steps: Number(settings.steps) });
  $('lm-pause').onclick = () => {
    post({ type: 'lm-pause' });
    $('lm-pause').disabled = true;
    setStatus('Pausing: the model is tested and writes a sample first…');
  };
  $('lm-reset').onclick = configure;
  $('lm-generate').onclick = sample;
  $('lm-download').onclick = () => post({ type: 'lm-save', corpus: settings.corpus });
  $('lm-upload').onchange = loadWeights;
  $('lm-text-file').onchange = readTextFile;
  $('lm-use-text').onclick = useText;
  $('lm-run-code').onclick = runCode;
  codeKeys($('lm-code'), runCode);
  $('lm-layer').onchange = $('lm-head').onchange = drawAttention;
  showTemperature();
  showOwnText();
  setBusy(true);

  function showSizes() {
    const options = Object.entries(SIZES).map(([name, c]) => {
      const slow = isSoftware && !FAST_ON_SOFTWARE.includes(name) ? ' (slow on this GPU)' : '';
      return new Option(`${name[0].toUpperCase()}${name.slice(1)}: ${sizeLabel(c)}${slow}`, name);
    });
    if (loaded) options.push(new Option(`From ${loaded.from}: ${sizeLabel(loaded)}`, 'loaded'));
    $('lm-size').replaceChildren(...options);
    $('lm-size').value = loaded ? 'loaded' : settings.size;
  }

  function changed(key) {
    const value = $(`lm-${key}`).value;
    if (key === 'seed' && !/^\d{1,5}$/.test(value)) return;
    settings[key] = ['seed', 'temperature'].includes(key) ? Number(value) : value;
    if (key === 'size') {
      loaded = null;
      showSizes();
    }
    if (key === 'corpus') {
      settings.prompt = PROMPTS[value];
      $('lm-prompt').value = settings.prompt;
      showOwnText();
    }
    history.replaceState(null, '', lmToHash(settings));
    if (key === 'every') post({ type: 'lm-sampling' });
    else if (['topk', 'temperature'].includes(key)) sample();
    else if (key === 'steps' && !training) showProgress(curves[0].at(-1) ?? 0);
    else if (key !== 'steps') configure();
  }

  function modelSettings() {
    const { corpus, lr, batch, steps, every, seed } = settings;
    const { n_layer, n_head, n_embd, block_size } = loaded ?? SIZES[settings.size];
    return { corpus, lr: Number(lr), batch: Number(batch), steps: Number(steps), every: Number(every), seed,
             n_layer, n_head, n_embd, block_size };
  }

  // A fresh model from the controls (the user's own text waits for Use this text).
  function configure() {
    if (!started) return;
    if (settings.corpus === 'custom' && !$('lm-own').dataset.used) {
      setStatus('Paste a text or choose a file, then press Use this text');
      return;
    }
    setBusy(true);
    setStatus('Making a fresh model…');
    post({ type: 'lm-configure', settings: modelSettings() });
  }

  function setBusy(busy) {
    showBusy('lm', ['lm-train', 'lm-reset', 'lm-download', 'lm-upload', 'lm-generate', 'lm-run-code'], busy, training);
  }

  function setStatus(text, kind) {
    showStatus('lm-status', text, kind);
  }

  // ---- the user's own text

  function showOwnText() {
    $('lm-own').hidden = settings.corpus !== 'custom';
  }

  async function readTextFile() {
    const file = await takeFile($('lm-text-file'));
    if (!file) return;
    try {
      $('lm-text').value = new TextDecoder('utf-8', { fatal: true }).decode(file.data);
    } catch {
      setStatus(`${file.name} is not UTF-8 text`, 'error');
      return;
    }
    useText();
  }

  function useText() {
    if (!started) return;   // the worker cannot take it yet: it stays in the box
    const text = $('lm-text').value;
    if (text.length > MAX_TEXT) {
      setStatus(`That text has ${text.length.toLocaleString('en')} characters: at most ${MAX_TEXT.toLocaleString('en')} fit here`, 'error');
      return;
    }
    $('lm-own').dataset.used = 'yes';
    // A new text, a new prompt to continue and to show the attention over: the text's start.
    settings.prompt = text.trimStart().split('\n')[0].slice(0, 12);
    $('lm-prompt').value = settings.prompt;
    history.replaceState(null, '', lmToHash(settings));
    post({ type: 'lm-text', text });
    configure();
  }

  // ---- samples and the prompt

  // A software GPU writes a shorter sample: each character is a forward pass of the model.
  function samplingMessage() {
    return { prompt: settings.prompt, length: isSoftware ? 100 : 300, temperature: settings.temperature,
             topK: Number(settings.topk), every: Number(settings.every) };
  }

  function sample() {
    if (started && info && promptOk()) post({ type: 'lm-sample' });
  }

  // The prompt's characters must be the text's: the model knows no others.
  function promptOk() {
    const unknown = [...new Set(settings.prompt)].filter((c) => !info.vocab.includes(c));
    $('lm-prompt-note').textContent = unknown.length
      ? `Not among this text's characters: ${unknown.map(shown).join(' ')}` : '';
    $('lm-prompt').classList.toggle('invalid', unknown.length > 0);
    return unknown.length === 0;
  }

  function promptChanged() {
    settings.prompt = $('lm-prompt').value.slice(0, MAX_PROMPT);
    history.replaceState(null, '', lmToHash(settings));
    clearTimeout(promptTimer);
    promptTimer = setTimeout(sample, 400);   // one sample when the typing pauses, not one per key
  }

  function showTemperature() {
    $('lm-temperature-out').textContent = Number($('lm-temperature').value).toFixed(1);
  }

  function showSample({ prompt, text, steps }) {
    const start = document.createElement('b');
    start.textContent = prompt;
    $('lm-sample').replaceChildren(start, text);
    $('lm-sample-note').textContent = `Written at step ${steps}: the prompt in bold, then ${text.length} characters of the model’s.`;
  }

  // ---- attention

  function showMaps(next) {
    maps = next;
    const pick = (id, count, word) => {
      const keep = Math.min(Number($(id).value) || 0, count - 1);
      $(id).replaceChildren(...Array.from({ length: count }, (_, i) => new Option(`${word} ${i + 1}`, i)));
      $(id).value = keep;
    };
    pick('lm-layer', maps.layers, 'Layer');
    pick('lm-head', maps.heads, 'Head');
    drawAttention();
  }

  // The chosen head's weights as a heat map: row i is the prompt's i-th character, and its cells
  // the weights it gives the characters up to it (they sum to 1; later ones get none).
  function drawAttention() {
    if (!maps) return;
    const canvas = $('lm-attention');
    const tokens = [...maps.tokens];
    const t = tokens.length;
    const at = (Number($('lm-layer').value) * maps.heads + Number($('lm-head').value)) * t * t;
    const rows = Array.from({ length: t }, (_, i) => Array.from(maps.weights.subarray(at + i * t, at + (i + 1) * t)));
    canvas.dataset.tokens = maps.tokens;
    canvas.dataset.weights = JSON.stringify(rows);   // what the map shows, for a reader or a test

    const ratio = window.devicePixelRatio || 1;
    const margin = 22;   // room for the characters along the top and the left
    const cell = Math.min(44, (($('lm-attention-box').clientWidth || 360) - margin) / t);
    const side = margin + cell * t;
    canvas.width = canvas.height = Math.round(side * ratio);
    canvas.style.width = canvas.style.height = `${side}px`;
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, side, side);
    rows.forEach((row, i) => row.forEach((w, j) => {
      ctx.fillStyle = j > i ? '#f2f4f7' : `rgb(${colour(w)})`;
      ctx.fillRect(margin + j * cell, margin + i * cell, cell - 0.5, cell - 0.5);
    }));
    if (cell >= 8) {
      ctx.fillStyle = '#344054';
      ctx.font = `${Math.min(14, cell * 0.8)}px ui-monospace, "DejaVu Sans Mono", monospace`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      tokens.forEach((c, i) => {
        ctx.fillText(shown(c), margin + (i + 0.5) * cell, margin / 2);
        ctx.fillText(shown(c), margin / 2, margin + (i + 0.5) * cell);
      });
    }
    canvas.onmousemove = (e) => {
      const box = canvas.getBoundingClientRect();
      const [j, i] = [Math.floor((e.clientX - box.left - margin) / cell), Math.floor((e.clientY - box.top - margin) / cell)];
      canvas.title = i >= 0 && j >= 0 && i < t && j <= i
        ? `${shown(tokens[i])} (position ${i + 1}) → ${shown(tokens[j])} (position ${j + 1}): ${rows[i][j].toFixed(3)}`
        : '';
    };
    $('lm-attention-note').textContent = [...settings.prompt].length > t
      ? `The last ${t} characters of the prompt (the model’s block).` : '';
  }

  function drawScale() {
    const canvas = $('lm-scale');
    const ctx = canvas.getContext('2d');
    for (let x = 0; x < canvas.width; x++) {
      ctx.fillStyle = `rgb(${colour(x / (canvas.width - 1))})`;
      ctx.fillRect(x, 0, 1, canvas.height);
    }
  }

  // ---- training readouts

  function fresh(steps) {
    curves = [[], [], [], []];
    chart.setData(curves);
    for (const id of ['lm-train-loss', 'lm-val-loss', 'lm-speed']) $(id).textContent = '–';
    showProgress(steps);
  }

  function showProgress(steps) {
    const runLength = Number(settings.steps);
    const start = plan > 0 ? plan - runLength : 0;
    $('lm-progress').max = runLength;
    $('lm-progress').value = Math.min(runLength, Math.max(0, steps - start));
    $('lm-step-count').textContent = String(steps);
  }

  function addPoint(step, trainLoss, valLoss) {
    if (curves[0].at(-1) === step) {
      if (trainLoss !== null) curves[1][curves[1].length - 1] = trainLoss;
      if (valLoss !== null) curves[2][curves[2].length - 1] = valLoss;
    } else {
      [step, trainLoss, valLoss, info.baseline].forEach((v, i) => curves[i].push(v));
    }
    chart.setData(curves);
  }

  function makeChart() {
    const box = $('lm-loss');
    const line = (label, stroke, extra = {}) => ({ label, stroke, width: 2, spanGaps: true, points: { show: false }, ...extra });
    chart = new uPlot({
      width: box.clientWidth || 400, height: 210,
      scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max ?? 1, 1)] } },
      axes: [{ label: 'training step', size: 40 }, { label: 'loss (nats per character)', size: 48 }],
      legend: { live: false },
      cursor: { show: false },
      series: [{}, line('training loss', '#f59322'), line('validation loss', '#0b3d63', { points: { show: true, size: 5 } }),
               line('baseline: letter frequencies', '#98a2b3', { width: 1.5, dash: [6, 4] })],
    }, curves, box);
    new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: 210 })).observe(box);
  }

  function showSession(next, why) {
    info = next;
    if (why !== 'configure') {   // a script or a file chose the model: say which size it is
      const size = Object.keys(SIZES).find((name) => sizeLabel(SIZES[name]) === sizeLabel(info.config));
      loaded = size ? null : { ...info.config, from: why === 'run' ? 'your script' : 'the file' };
      if (size) settings.size = size;
      showSizes();
      history.replaceState(null, '', lmToHash(settings));
    }
    if (why !== 'run') $('lm-code').value = info.script;
    const n = (v) => v.toLocaleString('en');
    $('lm-about').textContent = `${n(info.characters)} characters, ${info.vocab.length} different ones: the model learns `
      + `from the first ${n(info.train)} and is tested on the last ${n(info.val)}. It has ${n(info.params)} parameters.`;
    $('lm-baseline').textContent = info.baseline.toFixed(3);
    fresh(info.steps);
    promptOk();
  }

  // ---- weights

  async function loadWeights() {
    const file = await takeFile($('lm-upload'));
    if (!file) return;
    setBusy(true);
    setStatus(`Loading ${file.name}…`);
    post({ type: 'lm-load', data: file.data, name: file.name }, [file.data.buffer]);
  }

  // ---- the code panel

  function runCode() {
    if (!started) return;
    $('lm-output').replaceChildren();
    setBusy(true);
    setStatus('Running your script…');
    post({ type: 'lm-run', source: $('lm-code').value });
  }

  // ---- messages from the worker

  const handlers = {
    'lm-status': ({ text }) => setStatus(text),
    'lm-session': ({ info: next, why }) => showSession(next, why),
    'lm-state'({ training: now, plan: until }) {
      const finished = training && !now;
      training = now;
      plan = until;
      setBusy(false);
      if (now) setStatus('Training…');
      else if (finished) setStatus(curves[0].at(-1) >= plan ? `Trained ${plan} steps: press Train for ${settings.steps} more` : 'Paused');
    },
    'lm-progress'({ data: [steps, loss], stepMs }) {
      $('lm-train-loss').textContent = loss.toFixed(3);
      $('lm-speed').textContent = (1000 / stepMs).toFixed(1);
      showProgress(steps);
      addPoint(steps, loss, null);
    },
    'lm-eval'({ data: [steps, loss] }) {
      $('lm-val-loss').textContent = loss.toFixed(4);
      addPoint(steps, null, loss);
    },
    'lm-sample': ({ sample: s }) => showSample(s),
    'lm-attention': ({ maps: next }) => showMaps(next),
    'lm-weights'({ data }) {
      const name = `webgrad-gpt-${settings.corpus}.pt`;
      saveFile(data, name);
      setStatus(`Saved ${name} (${(data.byteLength / 1e6).toFixed(2)} MB)`);
    },
    'lm-ran'({ error }) {   // a script that ran: the worker said so in the status
      setBusy(false);
      if (!error) return;
      printTo($('lm-output'), error, 'error');
      setStatus('Your script raised an error (see below)', 'error');
    },
    'lm-error'({ text }) {
      setBusy(!started);  // without a worker (no WebGPU) there is nothing to press
      setStatus(text, 'error');
    },
  };

  makeChart();
  drawScale();
  showProgress(0);
  new ResizeObserver(drawAttention).observe($('lm-attention-box'));

  return {
    handlers,
    adapter(software) {  // before start: the default size suits the adapter
      isSoftware = software;
      settings.size ??= software ? 'tiny' : 'medium';
      showSizes();
    },
    start() {  // the worker is ready: the first configure loads the text
      if (started) return;
      started = true;
      $('lm-use-text').disabled = false;
      configure();
    },
    pause: () => training && post({ type: 'lm-pause' }),
    hash: () => lmToHash(settings),
  };
}

// A weight in [0, 1] as an [r, g, b] of SCALE, linearly between its stops.
function colour(w) {
  const x = Math.min(1, Math.max(0, w)) * (SCALE.length - 1);
  const i = Math.min(SCALE.length - 2, Math.floor(x));
  return SCALE[i].map((v, k) => Math.round(v + (SCALE[i + 1][k] - v) * (x - i)));
}
