// The page: three views (tabs) over one worker. This file is the toy playground's view (controls,
// URL state, plots) and the tabs; mnist.js is the MNIST view and lm.js the language model's. Python
// and the GPU run in worker.js.
import { lmView } from './lm.js';
import { mnistView } from './mnist.js';
import { codeEditor } from './editor.js';
import { CHOICES, configFrom, DEFAULTS, FEATURES, fromHash, parseFeatures, parseHidden, PRESETS, problemOf, scriptFor,
         toHash } from './script.js';
import { STEP_HINT, STEP_LABELS, stepFor } from './step_settings.js';
import { timeChart } from './time_chart.js';
import { drawNetwork, drawOutput, drawScale, lossChart, readFrame, readPoints } from './toy_plots.js';
import { $, adapterName, lossText, printTo, PythonWorker, showStatus, showToggle } from './ui.js';

// The URL hash holds the shown view's settings; "view=mnist" or "view=lm" marks another view's.
const VIEWS = ['playground', 'mnist', 'lm'];
const hashView = new URLSearchParams(location.hash.slice(1)).get('view');
let view = VIEWS.includes(hashView) ? hashView : 'playground';
const linkCorrections = [];  // what fromHash corrected in the toy's settings of the link
let config = fromHash(view === 'playground' ? location.hash : '', linkCorrections);
let worker = null;
let ready = false;           // the worker has Python and the GPU
let playing = false;
let playable = false;        // the worker has a model for Play (a script that fails leaves the last one)
let readyMs = null;          // how long the worker took to start, until the first model is drawn
let restarted = false;       // Stop restarted the worker: it starts from the controls' script
const RESTARTED = 'Stopped: Python did not stop within a second, so it is restarting';
let points = null;           // toy_plots.readPoints's
let lastFrame = null;        // toy_plots.readFrame's of the last frame
let curves = [[], [], []];   // steps, training loss, test loss
let diverged = null;         // the status line's words once the loss is no longer a number
let setCurves = null;        // the loss chart's
let toyTime = null;          // the "Where the time goes" panel (time_chart.js)
let scriptView = null;       // the view whose code panel's script Python runs now (the worker's 'busy' says)
let waitNote = null;         // the status line that the note of showWaiting covers: {id, text, className}
const WAITING = 'Waiting for your running script: press Stop to end it';

// ---- controls and URL

const LABELS = { sgd: 'SGD', adam: 'Adam', adamw: 'AdamW', gelu: 'GELU', relu: 'ReLU', ...STEP_LABELS };

function setupControls() {
  for (const [key, options] of Object.entries(CHOICES)) {
    $(key).replaceChildren(...options.map((o) => new Option(LABELS[o] ?? o, o)));
  }
  $('features').replaceChildren(...Object.entries(FEATURES).map(([name, label]) => featureToggle(name, label)));
  $('stepping').title = STEP_HINT;
  for (const key of [...Object.keys(DEFAULTS), 'problem', 'preset']) {
    $(key).addEventListener(key === 'preset' ? 'click' : 'change', () => changed(key));
    $(key).addEventListener('input', () => showRangeValues());
  }
  $('play').onclick = () => worker.postMessage({ type: 'play' });
  $('pause').onclick = () => worker.postMessage({ type: 'pause' });
  $('step').onclick = () => worker.postMessage({ type: 'step' });
  $('reset').onclick = () => worker.postMessage({ type: 'reset', play: playing });
  $('run-code').onclick = runCode;
  showControls();
  code.show(scriptFor(config));
}

function showControls() {
  for (const key of Object.keys(DEFAULTS)) $(key).value = config[key];
  $('hidden').value = config.hidden.split(',').join(', ');
  for (const key of ['hidden', 'seed']) showInvalid(key, null);
  for (const box of $('features').querySelectorAll('input')) box.checked = config.features.split(',').includes(box.value);
  for (const key of VIEW_ONLY) $(key).checked = config[key] === 1;
  const problem = problemOf(config.dataset);
  $('problem').value = problem;
  for (const option of $('dataset').options) option.hidden = problemOf(option.value) !== problem;
  $('preset-why').textContent = PRESETS[config.dataset].why;
  drawScale($('scale'), problem === 'regression');
  showRangeValues();
  drawPlots();
}

// A Features toggle: a checkbox named by the feature, labelled as it reads.
function featureToggle(name, label) {
  const box = Object.assign(document.createElement('input'), { type: 'checkbox', value: name });
  const toggle = document.createElement('label');
  toggle.className = 'toggle';
  toggle.dataset.testid = `feature-${name}`;
  toggle.append(box, label);
  return toggle;
}

// A typed value that will not do: its note (`${key}-note`) says what will, and the field is marked
// while it still shows the value (marked false: it went back to the one in use). note null: clears both.
function showInvalid(key, note, marked = true) {
  $(key).classList.toggle('invalid', note !== null && marked);
  $(`${key}-note`).textContent = note ?? '';
}

// Settings that change only what is drawn: no new script.
const VIEW_ONLY = ['testdata', 'discretize'];

function showRangeValues() {
  $('ratio-out').textContent = $('ratio').value;
  $('noise-out').textContent = $('noise').value;
  $('batch-out').textContent = $('batch').value;
}

// A control changed: the controls write a new script, once the user agrees to lose edits to the
// code; if they keep their code, the control goes back to the setting the code was made from.
async function changed(key) {
  const input = $(key);
  const next = { ...config };
  if (VIEW_ONLY.includes(key)) {
    config[key] = Number(input.checked);
    history.replaceState(null, '', toHash(config));
    drawPlots();
    return;
  }
  if (key === 'hidden') {
    const widths = parseHidden(input.value);
    showInvalid(key, widths ? null : `“${input.value.trim()}” will not do: the network keeps ${config.hidden.split(',').join(', ')}`
                                     + ' until this is a list such as 8, 8 (up to 6 layers of 1 to 64 units).');
    if (!widths) return;
    next.hidden = widths.join(',');
  } else if (key === 'features') {
    const checked = [...input.querySelectorAll('input:checked')].map((box) => box.value);
    if (!parseFeatures(checked.join(','))) {  // the network needs an input: the last one stays on
      showControls();
      return;
    }
    next.features = parseFeatures(checked.join(',')).join(',');
  } else if (key === 'problem') {   // a data set of the problem chosen, with its preset
    next.dataset = CHOICES.dataset.find((d) => problemOf(d) === input.value);
    Object.assign(next, PRESETS[next.dataset].settings);
  } else if (key === 'preset') {
    Object.assign(next, PRESETS[config.dataset].settings);
  } else {
    const rejected = [];
    next[key] = fromHash(toHash({ ...config, [key]: input.value }), rejected)[key];  // validates like a link would
    if (rejected.length) {   // a typed seed: the one in use stays, and the note says what will do
      showInvalid(key, `“${input.value}” will not do: ${rejected[0].allowed}. Still ${config[key]}.`, false);
      input.value = config[key];
      return;
    }
    if (key === 'dataset') Object.assign(next, PRESETS[next.dataset].settings);
  }
  const label = input.closest('.field')?.querySelector('.label')?.textContent.replace(/:.*/, '') ?? key;
  if (!(await code.mayReplace(`You changed “${label}”, and the script below has your edits.`))) {
    showControls();
    return;
  }
  config = next;
  history.replaceState(null, '', toHash(config));
  showControls();
  code.show(scriptFor(config));
  load(code.text);
}

// Once the adapter is known, how steps run (unless the link said) is its default (step_settings.js),
// and the controls' script says so; a script the user edited meanwhile stays, with its eager steps.
function adoptStepping(isSoftware) {
  if (config.stepping !== null) return;
  config.stepping = code.edited ? 'eager' : stepFor(isSoftware);
  $('stepping').value = config.stepping;
  if (!code.edited) code.show(scriptFor(config));
}

// Applies a script: the worker runs it as a module and Play trains what it built.
function load(source) {
  worker?.postMessage({ type: 'load', source, play: playing });  // no worker: no WebGPU, nothing to run
}

// Runs the code panel's script; the settings it sets that the controls offer show in them first
// (when they are all it changed, the code is the controls' again, with its summary line rewritten).
function runCode() {
  if (!worker) return;
  const read = configFrom(code.text, config);
  config = read.settings;
  history.replaceState(null, '', toHash(config));
  showControls();
  if (read.matches) code.show(scriptFor(config));
  code.markError(null);
  $('output').replaceChildren();
  setBusy(true);
  setStatus('Running your script…');
  worker.postMessage({ type: 'run', source: code.text });
}

function setBusy(busy) {
  for (const id of ['reset', 'step', 'play']) $(id).disabled = busy || !playable;
  $('run-code').disabled = busy;
  showToggle($('play'), $('pause'), playing, busy || !playing);
}

function setStatus(text, kind = '') {
  $('status').textContent = text;
  $('status').className = `status ${kind}`;
}

// Python's output goes to the shown view's code panel (the MNIST view has none: the toy's).
const pythonOutput = () => $(view === 'lm' ? 'lm-output' : 'output');

// ---- messages from the worker

const handlers = {
  status: ({ text }) => setStatus(restarted ? `${RESTARTED}: ${text}` : text),
  busy({ script }) {
    scriptView = script;
    showWaiting();
  },
  'no-webgpu': ({ reason }) => noWebGPU(reason),
  'device-lost': ({ reason }) => gpuLost(reason),
  ready({ adapter, isSoftware, loadMs }) {
    $('adapter').textContent = adapterName(adapter);
    setStatus('Making the model and drawing the data…');   // "Ready" once they are drawn ('ran')
    readyMs = loadMs;
    setBusy(false);
    adoptStepping(isSoftware);
    load(restarted ? scriptFor(config) : code.text);
    restarted = false;
    ready = true;
    mnist.adapter(isSoftware);
    lm.adapter(isSoftware);
    toyTime.ready();
    others[view]?.start();
  },
  points({ data }) {
    points = readPoints(data);
    lastFrame = null;
    curves = [[], [], []];
    toyTime.fresh();
    diverged = null;
    drawScale($('scale'), points.regression);
    drawPlots();
  },
  frame({ data }) {
    const frame = readFrame(data);
    const { step, trainLoss, testLoss } = frame;
    $('step-count').textContent = String(step);
    if (!Number.isFinite(trainLoss) || !Number.isFinite(testLoss)) {
      divergedAt(step, Number.isNaN(trainLoss) || Number.isNaN(testLoss) ? 'NaN' : 'infinite');
      return;
    }
    // a fresh model's score is chance's, not a result
    $('score-label').textContent = `${points.regression ? 'Test R²' : 'Test accuracy'}${step === 0 ? ' (untrained)' : ''}`;
    $('loss').textContent = lossText(trainLoss, 3);
    $('test-loss').textContent = lossText(testLoss, 3);
    $('accuracy').textContent = lossText(frame.score, 3);
    if (curves[0].at(-1) !== step) {
      curves[0].push(step);
      curves[1].push(trainLoss);
      curves[2].push(testLoss);
      setCurves(curves);
    }
    lastFrame = frame;
    drawPlots();
  },
  state({ playing: now }) {
    playing = now;
    setBusy(false);
    if (diverged) setStatus(diverged, 'error');
    else setStatus(now ? 'Training…' : 'Paused');
  },
  // After each script the worker ran: fresh, its model is the one drawn; otherwise the last one stays.
  ran({ ok, run, fresh, playable: can }) {
    playable = can;
    setBusy(false);
    const script = run ? 'Your script' : 'The script';
    const play = can ? 'Play trains the model drawn, from the last script that worked' : 'Play waits for a script that works';
    if (!ok) setStatus(`${script} raised an error (see below): ${play}`, 'error');
    else if (!fresh) setStatus(`${script} ran, but Play needs more of it (see below): ${play}`, 'error');
    else if (run) setStatus('Your script ran: Play trains its model further');
    else setStatus(readyMs === null ? 'Ready: press Play' : `Ready in ${(readyMs / 1000).toFixed(1)} s: press Play`);
    readyMs = null;
  },
  // After Stop: where the interrupt landed; restarted: the worker did not answer and a fresh one starts.
  stopped({ where, playable: can, steps, restarted: fresh }) {
    playing = false;
    playable = can;
    if (fresh) [ready, restarted] = [false, true];
    setBusy(fresh);
    const what = fresh ? RESTARTED.slice('Stopped'.length)
                       : where ? `: Python was interrupted ${where}` : ` at step ${steps}`;
    const next = fresh ? 'the controls’ model comes back in a moment, and Run runs your code again'
                       : can ? 'Play goes on training the model drawn' : 'Play waits for a script that works';
    setStatus(`Stopped${what}; ${next}.`);
  },
  profile: (message) => toyTime.show(message),
  stdout: ({ text }) => printTo(pythonOutput(), text),
  stderr: ({ text }) => printTo(pythonOutput(), text, 'note'),
  error({ text }) {
    printTo($('output'), text, 'error');   // the toy's error
    code.markError(text);
    setStatus('Error: see the output under the code', 'error');
    setBusy(false);
  },
};

// The loss is no longer a number: training stops, the readouts and plots keep the last frame that
// was one (a model of NaN weights draws nothing worth seeing), and the status says what to change.
function divergedAt(step, loss) {
  if (playing) worker.postMessage({ type: 'pause' });
  diverged = `Training diverged at step ${step} (the loss is ${loss}): lower the learning rate or the `
    + 'regularization, then press Reset';
  setStatus(diverged, 'error');
}

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

// The output plot and the network diagram, from the last frame (or the settings, before one).
function drawPlots() {
  drawOutput($('boundary'), points, lastFrame?.output, { testData: config.testdata === 1, discretize: config.discretize === 1 });
  const features = parseFeatures(config.features);
  const regression = problemOf(config.dataset) === 'regression';
  const widths = lastFrame?.widths.length ? lastFrame.widths : [features.length, ...parseHidden(config.hidden), regression ? 1 : 2];
  // the controls' names, unless the script (edited) has other inputs or outputs
  const inputNames = widths[0] === features.length ? features.map((f) => FEATURES[f])
    : Array.from({ length: widths[0] }, (_, j) => `input ${j + 1}`);
  const outputNames = widths.at(-1) === 1 ? ['value'] : widths.at(-1) === 2 ? ['class 0', 'class 1'] : [];
  drawNetwork($('net'), widths, inputNames, outputNames, lastFrame);
  $('shape').textContent = `${widths.join(' → ')} units`;
}

// A link's settings that the shown view could not take: the address bar gets the settings used
// instead, and a notice says what changed and why.
function showCorrections(corrections) {
  if (corrections.length === 0) return;
  history.replaceState(null, '', view === 'playground' ? toHash(config) : others[view].hash());
  const said = (text) => (text.length > 24 ? `${text.slice(0, 24)}…` : text);
  const why = corrections.map(({ key, value, allowed, using }) => (allowed === null
    ? `“${said(key)}” is no setting here, so it was dropped` : `${key}=${said(value)} is not ${allowed}: using ${using}`));
  $('url-notice-text').textContent = `The link’s settings were corrected. ${why.join('; ')}.`;
  $('url-notice').hidden = false;
  $('url-notice-close').onclick = () => { $('url-notice').hidden = true; };
}

// ---- tabs

// Python runs one task at a time: while a code panel's script runs (an endless loop, say), what
// another view asks for waits for it, so the view shown says so, until the script ends and its
// status line comes back (unless the view wrote another meanwhile).
function showWaiting() {
  if (waitNote && $(waitNote.id).textContent === WAITING) {
    Object.assign($(waitNote.id), { textContent: waitNote.text, className: waitNote.className });
  }
  waitNote = null;
  if (scriptView === null || scriptView === view) return;
  const id = view === 'playground' ? 'status' : `${view}-status`;
  waitNote = { id, text: $(id).textContent, className: $(id).className };
  showStatus(id, WAITING);
}

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
  showWaiting();
}

// ---- start

const post = (message, transfer = []) => worker?.postMessage(message, transfer);
const mnist = mnistView(post, view === 'mnist' ? location.hash : '');   // a link holds the shown view's settings only
const lm = lmView(post, view === 'lm' ? location.hash : '');
const others = { mnist, lm };   // the views besides the playground: {handlers, start, pause, hash, corrections}
const viewErrors = (text) => Object.entries(others).forEach(([name, v]) => v.handlers[`${name}-error`]({ text }));
for (const v of VIEWS) $(`tab-${v}`).onclick = () => switchTo(v);
const code = codeEditor($('code'), { testid: 'code', label: 'Python training script', filename: 'train.py',
                                    run: runCode, badge: $('code-edited') });
setupControls();
setCurves = lossChart($('chart'));
toyTime = timeChart('', post, 'Play', () => playing);
showView();
showCorrections(view === 'playground' ? linkCorrections : others[view].corrections);
if (!navigator.gpu) {
  noWebGPU('This browser does not expose WebGPU (navigator.gpu is missing).');
} else {
  worker = new PythonWorker((data) => (handlers[data.type] ?? mnist.handlers[data.type] ?? lm.handlers[data.type])?.(data));
}
