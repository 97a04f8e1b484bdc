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
import { loadPyodide } from './pyodide/pyodide.mjs';
import { Bridge } from './bridge.js';

const post = (type, data = {}, transfer = []) => postMessage({ type, ...data }, transfer);
const status = (text) => post('status', { text });

const PAGE_MODULES = ['playground.py', 'mnist_view.py'];

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
    const info = await py.runPythonAsync(`
import json, os
os.environ["WEBGRAD_DEVICE"] = "webgpu"
import webgrad
json.dumps(webgrad.get_backend("webgpu").info)`);
    playground = py.pyimport('playground');
    post('ready', { adapter: JSON.parse(info), loadMs: performance.now() - t0 });
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

// ---- the MNIST view

const MNIST_FILES = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'];
let mnist = null;         // a mnist_view.View: the data on the GPU and the Trainer
let mnistSettings = null; // the controls' settings of the current Trainer
let mnistPlan = 0;        // the step count that Train stops at
let mnistEvaluatedAt = -1; // the step count of the test accuracy shown

// An MNIST call through the queue; its error (a Python traceback) shows in the MNIST view as its last line.
const mnistTask = (task) => serial(async () => {
  try {
    await task();
  } catch (e) {
    mnistLoop.stop();
    post('mnist-error', { text: e.message.trim().split('\n').at(-1) });
  }
});
const mnistLoop = new ChunkedLoop(mnistTask);

// A gzipped file of the site, decompressed as it streams in.
async function gunzip(path) {
  const stream = (await fetchOk(path)).body.pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function loadMnist() {
  post('mnist-status', { text: 'Loading MNIST (11 MB)…' });
  const [trainImages, trainLabels, testImages, testLabels] = await Promise.all(MNIST_FILES.map((f) => gunzip(`mnist/${f}.gz`)));
  post('mnist-status', { text: 'Copying MNIST to the GPU…' });
  mnist = await call(py.pyimport('mnist_view').View, trainImages, trainLabels, testImages, testLabels);
  const [images, labels] = [testImages.slice(16), testLabels.slice(8)];  // IDX headers: 16 and 8 bytes
  post('mnist-data', { images, labels }, [images.buffer, labels.buffer]);
}

async function mnistEvaluate() {
  const predictions = await call(mnist.trainer.evaluate);
  mnistEvaluatedAt = mnist.trainer.steps;
  post('mnist-eval', { steps: mnistEvaluatedAt, predictions }, [predictions.buffer]);
}

async function mnistConfigure(settings) {
  mnistLoop.stop();
  if (!mnist) await loadMnist();
  mnistSettings = settings;
  const { model, lr, batch, test, seed } = settings;  // the controls' strings
  await call(mnist.configure, model, Number(lr), Number(batch), Number(test), Number(seed));
  mnistPlan = 0;
  post('mnist-state', { training: false, plan: 0 });
  // Testing a fresh CNN on 10,000 digits takes a minute on a software GPU: say so (a Train pressed
  // meanwhile starts after it).
  post('mnist-status', { text: `Testing the new model on ${test} digits…` });
  await mnistEvaluate();
  post('mnist-status', { text: 'Ready: press Train' });
}

// Trains until the plan's step count, in chunks of about 0.3 s, each followed by a progress
// message; the test set is evaluated every few seconds (at most a ninth of the time) and when
// training stops, so that the accuracy shown is the model's.
async function mnistTrain() {
  if (mnistLoop.running || !mnist?.trainer) return;
  if (mnist.trainer.steps >= mnistPlan) mnistPlan = mnist.trainer.steps + Number(mnistSettings.steps);
  post('mnist-state', { training: true, plan: mnistPlan });
  let lastEval = performance.now();
  let evalMs = 0;
  const latest = await mnistLoop.run(async (chunk) => {
    const count = Math.min(chunk, mnistPlan - mnist.trainer.steps);
    const t0 = performance.now();
    const data = await call(mnist.trainer.step, count);
    const stepMs = (performance.now() - t0) / count;
    post('mnist-progress', { data, stepMs }, [data.buffer]);
    if (mnist.trainer.steps >= mnistPlan) mnistLoop.stop();
    else if (performance.now() - lastEval > Math.max(3000, 8 * evalMs)) {
      const t1 = performance.now();
      await mnistEvaluate();
      lastEval = performance.now();
      evalMs = lastEval - t1;
    }
    return Math.max(1, Math.min(500, Math.round(300 / stepMs)));
  });
  if (latest) {
    await mnistTask(async () => { if (mnistEvaluatedAt !== mnist.trainer.steps) await mnistEvaluate(); });
    post('mnist-state', { training: false, plan: mnistPlan });
  }
}

async function mnistLoadWeights(data, name) {
  mnistLoop.stop();
  const model = await call(mnist.load_weights, data, name);
  mnistSettings.model = model;
  mnistPlan = 0;
  post('mnist-state', { training: false, plan: 0 });
  post('mnist-loaded', { model });
  await mnistEvaluate();
}

const mnistMessages = {
  'mnist-configure': ({ settings }) => mnistTask(() => mnistConfigure(settings)),
  'mnist-train': () => queue.then(mnistTrain),  // after a pending configure
  'mnist-pause': () => mnistLoop.stop(),
  'mnist-predict': ({ pixels }) => mnistTask(async () => {
    if (!mnist?.trainer) return;
    const data = await call(mnist.trainer.predict, pixels);
    post('mnist-probs', { data }, [data.buffer]);
  }),
  'mnist-save': () => mnistTask(async () => {
    const data = await call(mnist.trainer.weights);
    post('mnist-weights', { data, model: mnist.trainer.kind }, [data.buffer]);
  }),
  'mnist-load': ({ data, name }) => mnistTask(() => mnistLoadWeights(data, name)),
};

onmessage = ({ data: msg }) => {
  if (!py) return;
  if (mnistMessages[msg.type]) mnistMessages[msg.type](msg);
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
