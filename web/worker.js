// The page's worker: Pyodide, webgrad and the GPU live here, so training never blocks the page.
//
// The toy playground's messages:
//   in:  {type: 'load', source, play}, {type: 'reset', play}, {type: 'run', source},
//        {type: 'play' | 'pause' | 'step'}
//   out: {type: 'status', text}, {type: 'ready', adapter}, {type: 'no-webgpu', reason}, {type: 'device-lost', reason},
//        {type: 'points', data}, {type: 'frame', data}, {type: 'state', playing},
//        {type: 'stdout' | 'stderr', text}, {type: 'error', text}, {type: 'ran', ok}
// The MNIST view's (web/mnist_view.py does the Python side):
//   in:  {type: 'mnist-configure', settings: {model, lr, batch, steps, test, seed}} (the first one
//        loads the data), {type: 'mnist-train' | 'mnist-pause' | 'mnist-save'},
//        {type: 'mnist-predict', pixels}, {type: 'mnist-load', data, name}
//   out: {type: 'mnist-status', text}, {type: 'mnist-data', images, labels} (the test set, headers
//        stripped), {type: 'mnist-progress', data: [steps, loss, accuracy], stepMs},
//        {type: 'mnist-eval', steps, predictions}, {type: 'mnist-state', training, plan},
//        {type: 'mnist-probs', data}, {type: 'mnist-weights', data, model},
//        {type: 'mnist-loaded', model}, {type: 'mnist-error', text}
// The language model's (web/lm_view.py does the Python side): each message in carries sampling:
// {prompt, length, temperature, topK, every} (what the samples start from and how they are drawn,
// every: the steps between two while training).
//   in:  {type: 'lm-configure', settings} (a fresh model; settings as lm_view.script takes them),
//        {type: 'lm-text', text} (the user's own text, for the next configure), {type: 'lm-run', source},
//        {type: 'lm-train', steps}, {type: 'lm-pause'}, {type: 'lm-sample'} (a sample now),
//        {type: 'lm-sampling'} (the sampling settings alone),
//        {type: 'lm-save', corpus}, {type: 'lm-load', data, name}
//   out: {type: 'lm-status', text}, {type: 'lm-session', info, why: 'configure' | 'run' | 'load'},
//        {type: 'lm-progress', data: [steps, loss], stepMs}, {type: 'lm-eval', data: [steps, loss]},
//        {type: 'lm-state', training, plan}, {type: 'lm-sample', sample}, {type: 'lm-attention', maps},
//        {type: 'lm-weights', data}, {type: 'lm-ran', error: the script's traceback or null},
//        {type: 'lm-error', text}
import { loadPyodide } from './pyodide/pyodide.mjs';
import { Bridge } from './bridge.js';

const post = (type, data = {}, transfer = []) => postMessage({ type, ...data }, transfer);
const status = (text) => post('status', { text });

const PAGE_MODULES = ['playground.py', 'mnist_view.py', 'lm_view.py'];
// The language models' corpora, as the site's corpora/ folder lays them out (build.py); webgrad.data
// finds them there through the environment set up in start().
const CORPORA = '/home/pyodide/corpora';

let py = null;
let playground = null;  // the Python module web/playground.py
let session = null;     // a playground.Session: the script's namespace and the step count
let source = '';        // the script the session came from; Reset runs it again

// Training in chunks of steps, each chunk a task of the queue into Python, so that a Pause (stop)
// or any other message gets in between chunks. One loop runs at a time: Pause, or a newer run,
// ends it.
class ChunkedLoop {
  constructor(task) {
    this.task = task;       // (async () => {...}) => Promise: runs it in the queue into Python
    this.running = false;
    this.generation = 0;    // the running loop's number
  }

  // Trains chunk(count) after chunk(count) until stopped: each returns the next one's step count.
  // Resolves to whether this loop was still the latest when it ended (a newer one says nothing).
  async run(chunk) {
    this.running = true;
    const me = ++this.generation;
    const current = () => this.running && me === this.generation;
    let count = 1;
    while (current()) {
      await this.task(async () => { if (current()) count = await chunk(count); });
      await new Promise((resolve) => setTimeout(resolve, 0));  // let a Pause in
    }
    return me === this.generation;
  }

  stop() {
    this.running = false;
  }
}

// Python is entered through this one queue: a call suspended in run_sync (awaiting the GPU) lets
// the event loop run, and a second Python call must not start then.
let queue = Promise.resolve();
const serial = (task) => (queue = queue.then(task).catch((e) => {
  playLoop.stop();
  post('error', { text: e.message });
}));
// A Python call that may block on the GPU must go through callPromising (JSPI stack switching).
const call = (fn, ...args) => fn.callPromising(...args);
const playLoop = new ChunkedLoop(serial);

async function start() {
  if (!navigator.gpu) {
    post('no-webgpu', { reason: 'This browser does not expose WebGPU (navigator.gpu is missing).' });
    return;
  }
  status('Loading Python (Pyodide)…');
  const t0 = performance.now();
  py = await loadPyodide({ indexURL: new URL('./pyodide/', import.meta.url).href });
  py.setStdout({ batched: (text) => post('stdout', { text }) });
  py.setStderr({ batched: (text) => post('stderr', { text }) });

  status('Installing webgrad…');
  const [wheel, ...modules] = await Promise.all([fetchOk('webgrad.whl').then((r) => r.arrayBuffer()),
                                                 ...PAGE_MODULES.map((m) => fetchOk(m).then((r) => r.text()))]);
  const sitePackages = py.runPython('import site; site.getsitepackages()[0]');
  py.unpackArchive(wheel, 'wheel', { extractDir: sitePackages });
  PAGE_MODULES.forEach((m, i) => py.FS.writeFile(`/home/pyodide/${m}`, modules[i]));

  status('Opening the GPU…');
  const bridge = new Bridge();
  bridge.onError = (text) => post('error', { text });
  bridge.onLost = (reason) => post('device-lost', { reason });
  py.registerJsModule('webgrad_bridge', { bridge });
  try {
    // The page always computes on webgpu, even on a software adapter (natively that would mean cpu).
    // The torch alias: "import torch" gives webgrad, so PyTorch code pasted into a code panel runs as written.
    const info = await py.runPythonAsync(`
import json, os
os.environ["WEBGRAD_DEVICE"] = "webgpu"
os.environ["WEBGRAD_NAMES"] = "${CORPORA}/names"
os.environ["WEBGRAD_SHAKESPEARE"] = "${CORPORA}/shakespeare"
import webgrad
import webgrad.torch_alias
webgrad.torch_alias.install()
backend = webgrad.get_backend("webgpu")
json.dumps({"adapter": backend.info, "isSoftware": backend.is_software})`);
    playground = py.pyimport('playground');
    post('ready', { ...JSON.parse(info), loadMs: performance.now() - t0 });
  } catch (e) {
    const reason = /no-adapter/.test(e.message) ? 'WebGPU is on, but the browser offered no GPU adapter.' : e.message;
    post('no-webgpu', { reason });
  }
}

async function fetchOk(path) {
  const response = await fetch(new URL(path, import.meta.url), { cache: 'no-cache' });
  if (!response.ok) throw new Error(`could not load ${path}: HTTP ${response.status}`);
  return response;
}

// Builds a new session from text (the controls' script, or the user's with Run); sends its points
// and a first frame. Returns whether the script ran without an error.
async function load(text, runMain) {
  playLoop.stop();
  session?.destroy();
  source = text;
  session = await call(playground.Session, text, runMain);
  const error = session.error;
  if (error) post('error', { text: error });
  else if (session.missing) post('stderr', { text: session.missing });
  if (session.playable) {
    const points = await call(session.points);
    post('points', { data: points }, [points.buffer]);
    await frame();
  }
  return !error;
}

async function frame() {
  const data = await call(session.frame);
  post('frame', { data }, [data.buffer]);
}

// Play trains in chunks of steps, each followed by a frame. The chunk grows until training takes
// two thirds of the time: a frame costs the same however many steps came before it.
async function play() {
  if (playLoop.running || !session?.playable) return;
  post('state', { playing: true });
  const latest = await playLoop.run(async (perFrame) => {
    const t0 = performance.now();
    await call(session.step, perFrame);
    const t1 = performance.now();
    await frame();
    const stepMs = (t1 - t0) / perFrame;
    const frameMs = performance.now() - t1;
    return Math.max(1, Math.min(512, Math.round(Math.max(2 * frameMs, 60) / stepMs)));
  });
  if (latest) post('state', { playing: false });
}

// ---- views that train to a plan (MNIST, the language model)

// A Python error's last line (a traceback's is the exception), for a view's status line.
const lastLine = (e) => e.message.trim().split('\n').at(-1);

// A view's training: Train runs its trainer's steps in chunks of about 0.3 s until the plan's step
// count, each chunk followed by a `<name>-progress` message; the model is evaluated every few seconds
// (at most a ninth of the time) and when training stops, so that what the view shows is the model's.
// Its Python calls go through task(): an error stops training and shows in the view as its last line.
// A view subclasses it with trainer() (a Python object with .steps and .step(count)) and evaluation()
// (which posts what the view shows).
class PlannedTraining {
  constructor(name) {
    this.name = name;
    this.plan = 0;             // the step count that Train stops at
    this.evaluatedAt = -1;     // the step count of the evaluation shown
    this.evalMs = 0;           // how long the last one took
    this.task = (fn) => serial(async () => {
      try {
        await fn();
      } catch (e) {
        this.loop.stop();
        post(`${name}-error`, { text: lastLine(e) });
      }
    });
    this.loop = new ChunkedLoop(this.task);
  }

  // Where a chunk must end (a view that does something every N steps stops there).
  chunkEnd() { return Infinity; }

  // After each chunk that did not end the plan.
  async afterChunk() {}

  // When training stops: the evaluation of the model as it is.
  async finish() {
    if (this.evaluatedAt !== this.trainer().steps) await this.evaluate();
  }

  state(training) {
    post(`${this.name}-state`, { training, plan: this.plan });
  }

  async evaluate() {
    const t0 = performance.now();
    await this.evaluation();
    this.evalMs = performance.now() - t0;
    this.evaluatedAt = this.trainer().steps;
  }

  // A fresh model: no plan yet.
  restart() {
    this.loop.stop();
    this.plan = 0;
    this.state(false);
  }

  async train(runLength) {
    const trainer = this.trainer();
    if (this.loop.running || !trainer) return;
    if (trainer.steps >= this.plan) this.plan = trainer.steps + runLength;
    this.state(true);
    let lastEval = performance.now();
    const latest = await this.loop.run(async (chunk) => {
      const count = Math.min(chunk, this.plan - trainer.steps, this.chunkEnd(trainer.steps) - trainer.steps);
      const t0 = performance.now();
      const data = await call(trainer.step, count);
      const stepMs = (performance.now() - t0) / count;
      post(`${this.name}-progress`, { data, stepMs }, [data.buffer]);
      if (trainer.steps >= this.plan) {
        this.loop.stop();
      } else {
        await this.afterChunk();
        if (performance.now() - lastEval > Math.max(3000, 8 * this.evalMs)) {
          await this.evaluate();
          lastEval = performance.now();
        }
      }
      return Math.max(1, Math.min(500, Math.round(300 / stepMs)));
    });
    if (latest) {
      await this.task(() => this.finish());
      this.state(false);
    }
  }
}

// A gzipped file of the site, decompressed as it streams in.
async function gunzip(path) {
  const stream = (await fetchOk(path)).body.pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// ---- the MNIST view

const MNIST_FILES = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'];
let mnist = null;         // a mnist_view.View: the data on the GPU and the Trainer
let mnistSettings = null; // the controls' settings of the current Trainer

const mnistTraining = new class extends PlannedTraining {
  trainer() { return mnist?.trainer; }

  async evaluation() {
    const predictions = await call(mnist.trainer.evaluate);
    post('mnist-eval', { steps: mnist.trainer.steps, predictions }, [predictions.buffer]);
  }
}('mnist');

async function loadMnist() {
  post('mnist-status', { text: 'Loading MNIST (11 MB)…' });
  const [trainImages, trainLabels, testImages, testLabels] = await Promise.all(MNIST_FILES.map((f) => gunzip(`mnist/${f}.gz`)));
  post('mnist-status', { text: 'Copying MNIST to the GPU…' });
  mnist = await call(py.pyimport('mnist_view').View, trainImages, trainLabels, testImages, testLabels);
  const [images, labels] = [testImages.slice(16), testLabels.slice(8)];  // IDX headers: 16 and 8 bytes
  post('mnist-data', { images, labels }, [images.buffer, labels.buffer]);
}

async function mnistConfigure(settings) {
  mnistTraining.loop.stop();
  if (!mnist) await loadMnist();
  mnistSettings = settings;
  const { model, lr, batch, test, seed } = settings;  // the controls' strings
  await call(mnist.configure, model, Number(lr), Number(batch), Number(test), Number(seed));
  mnistTraining.restart();
  // Testing a fresh CNN on 10,000 digits takes a minute on a software GPU: say so (a Train pressed
  // meanwhile starts after it).
  post('mnist-status', { text: `Testing the new model on ${test} digits…` });
  await mnistTraining.evaluate();
  post('mnist-status', { text: 'Ready: press Train' });
}

async function mnistLoadWeights(data, name) {
  mnistTraining.loop.stop();
  const model = await call(mnist.load_weights, data, name);
  mnistSettings.model = model;
  mnistTraining.restart();
  post('mnist-loaded', { model });
  await mnistTraining.evaluate();
}

const mnistMessages = {
  'mnist-configure': ({ settings }) => mnistTraining.task(() => mnistConfigure(settings)),
  'mnist-train': () => queue.then(() => mnistTraining.train(Number(mnistSettings?.steps))),  // after a pending configure
  'mnist-pause': () => mnistTraining.loop.stop(),
  'mnist-predict': ({ pixels }) => mnistTraining.task(async () => {
    if (!mnist?.trainer) return;
    const data = await call(mnist.trainer.predict, pixels);
    post('mnist-probs', { data }, [data.buffer]);
  }),
  'mnist-save': () => mnistTraining.task(async () => {
    const data = await call(mnist.trainer.weights);
    post('mnist-weights', { data, model: mnist.trainer.kind }, [data.buffer]);
  }),
  'mnist-load': ({ data, name }) => mnistTraining.task(() => mnistLoadWeights(data, name)),
};

// ---- the language-model view

let lm = null;            // an lm_view.View: the Session that Train trains
let corpora = null;       // the site's corpora/index.json: each corpus's files
const corporaHere = new Set();  // the corpora written to Pyodide's file system
let sampling = null;      // the page's latest sampling settings (see above)

const lmTraining = new class extends PlannedTraining {
  constructor() {
    super('lm');
    this.sampledAt = -1;   // the step count of the sample and attention maps shown
  }

  trainer() { return lm?.session; }

  async evaluation() {
    const data = await call(lm.session.evaluate);
    post('lm-eval', { data }, [data.buffer]);
  }

  chunkEnd(steps) { return (Math.floor(steps / sampling.every) + 1) * sampling.every; }

  async afterChunk() {
    if (lm.session.steps % sampling.every === 0) await this.show();
  }

  async finish() {
    await super.finish();
    if (this.sampledAt !== lm.session.steps) await this.show();
  }

  // A new sample, and the attention maps of the prompt, from the model as it is.
  async show() {
    const { prompt, length, temperature, topK } = sampling;
    const sample = JSON.parse(await call(lm.session.sample, prompt, length, temperature, topK));
    this.sampledAt = lm.session.steps;
    post('lm-sample', { sample });
    const maps = await call(lm.session.attention, prompt);
    post('lm-attention', { maps }, [maps.weights.buffer]);
  }
}();

// Writes a corpus's files where webgrad.data looks for it (start() points it there), once.
async function loadCorpus(name) {
  if (name === 'custom' || corporaHere.has(name)) return;
  corpora ??= await (await fetchOk('corpora/index.json')).json();
  const bytes = corpora[name].reduce((total, f) => total + f.bytes, 0);
  post('lm-status', { text: `Loading the text (${(bytes / 1e6).toFixed(1)} MB)…` });
  for (const { file } of corpora[name]) {
    const data = file.endsWith('.gz') ? await gunzip(`corpora/${file}`)
                                      : new Uint8Array(await (await fetchOk(`corpora/${file}`)).arrayBuffer());
    const path = `${CORPORA}/${file.replace(/\.gz$/, '')}`;
    py.FS.mkdirTree(path.slice(0, path.lastIndexOf('/')));
    py.FS.writeFile(path, data);
  }
  corporaHere.add(name);
}

// A new Session (made by the controls, the code panel or a weights file): the page starts over from
// its info, its validation loss, a sample and the prompt's attention; then says `done`. Returns the
// error of a script that Run could not make a Session of (the current one stays).
async function lmStart(why, make, done) {
  lmTraining.loop.stop();
  lm ??= await call(py.pyimport('lm_view').View);
  const info = JSON.parse(await make());
  if (info.error) return info.error;
  lmTraining.restart();
  post('lm-session', { info, why });
  post('lm-status', { text: 'Testing the model on the validation text…' });
  await lmTraining.evaluate();
  await lmTraining.show();
  post('lm-status', { text: done });
  return null;
}

const lmMessages = {
  'lm-configure': ({ settings }) => lmTraining.task(async () => {
    await loadCorpus(settings.corpus);
    await lmStart('configure', () => call(lm.configure, JSON.stringify(settings)), 'Ready: press Train');
  }),
  'lm-text': ({ text }) => lmTraining.task(async () => py.FS.writeFile('/home/pyodide/input.txt', text)),
  'lm-run': ({ source }) => lmTraining.task(async () => {
    const error = await lmStart('run', () => call(lm.run, source), 'Your script ran: Train trains its model further');
    post('lm-ran', { error });
  }),
  'lm-train': ({ steps }) => queue.then(() => lmTraining.train(steps)),  // after a pending configure
  'lm-pause': () => lmTraining.loop.stop(),
  'lm-sample': () => lmTraining.task(async () => { if (lm?.session) await lmTraining.show(); }),
  'lm-sampling': () => {},   // onmessage took its settings
  'lm-save': ({ corpus }) => lmTraining.task(async () => {
    const data = await call(lm.session.weights, corpus);
    post('lm-weights', { data }, [data.buffer]);
  }),
  'lm-load': ({ data, name }) => lmTraining.task(
    () => lmStart('load', () => call(lm.load_weights, data, name), `Loaded ${name}: Train goes on from it`)),
};

onmessage = ({ data: msg }) => {
  if (!py) return;
  if (msg.sampling) sampling = msg.sampling;
  const viewMessage = mnistMessages[msg.type] ?? lmMessages[msg.type];
  if (viewMessage) viewMessage(msg);
  else if (msg.type === 'pause') playLoop.stop();
  else if (msg.type === 'play') queue.then(play);  // after a pending load
  else if (msg.type === 'step') serial(async () => {
    if (!session?.playable) return;
    await call(session.step, 1);
    await frame();
  });
  else if (msg.type === 'load' || msg.type === 'reset') {
    // a new session while playing goes on playing (the app says so with play: true)
    serial(() => load(msg.type === 'load' ? msg.source : source, false)).then(() => msg.play && play());
  } else if (msg.type === 'run') serial(async () => post('ran', { ok: await load(msg.source, true) }));
};

start().catch((e) => post('error', { text: `The playground could not start: ${e.message}` }));
