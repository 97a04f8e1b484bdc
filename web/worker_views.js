// The worker's side of the views that train to a plan: MNIST (web/mnist_view.py does its Python) and
// the language model (web/lm_view.py); worker.js lists their messages and routes them here.
import { call, ChunkedLoop, fetchOk, gunzip, post, PROFILE_STEPS, serial, startRun,
         StepProfiler } from './worker_python.js';

let py = null;
// The language models' corpora, as the site's corpora/ folder lays them out (build.py); webgrad.data
// finds them there through the environment worker.js sets up.
export const CORPORA = '/home/pyodide/corpora';

// A Python error's last line (a traceback's is the exception), for a view's status line.
const lastLine = (e) => e.message.trim().split('\n').at(-1);

// A view's training: Train runs its trainer's steps in chunks of about 0.3 s until the plan's step
// count, each chunk followed by a `<name>-progress` message; the model is evaluated every few seconds
// (at most a ninth of the time) and when training stops, so that what the view shows is the model's.
// Its Python calls go through task(): an error stops training and shows in the view as its last line
// (after the run's end, whose '<name>-state' would say 'Paused' over it).
// A view subclasses it with trainer() (a Python object with .steps and .step(count)) and evaluation()
// (which posts what the view shows). A chunk that its profiler takes is a few steps, profiled: their
// progress carries no speed (stepMs null), and the next chunk's size stays.
class PlannedTraining {
  constructor(name) {
    this.name = name;
    this.plan = 0;             // the step count that Train stops at
    this.evaluatedAt = -1;     // the step count of the evaluation shown
    this.evalMs = 0;           // how long the last one took
    this.failed = null;        // the error that ended the running Train run, said once it has ended
    this.task = (fn, script = null) => serial(fn, (e) => {
      if (this.loop.running) {
        this.loop.stop();
        this.failed = lastLine(e);
      } else {
        post(`${name}-error`, { text: lastLine(e) });
      }
    }, script);
    this.loop = new ChunkedLoop(this.task);
    this.profiler = new StepProfiler(`${name}-`);
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
    this.profiler.fresh();
    this.plan = 0;
    this.state(false);
  }

  // Trains on to the plan of a paused run, or runLength steps more once it has ended or newRun says so.
  async train(runLength, newRun = false) {
    const trainer = this.trainer();
    if (this.loop.running || !trainer) return;
    if (newRun || trainer.steps >= this.plan) this.plan = trainer.steps + runLength;
    this.state(true);
    let lastEval = performance.now();
    const latest = await this.loop.run(async (chunk) => {
      const profiling = this.profiler.due(trainer.steps);
      const count = Math.min(profiling ? PROFILE_STEPS : chunk, this.plan - trainer.steps,
                             this.chunkEnd(trainer.steps) - trainer.steps);
      const t0 = performance.now();
      const data = profiling ? await this.profiler.run(trainer.step, count, trainer.steps)
                             : await call(trainer.step, count);
      const stepMs = profiling ? null : (performance.now() - t0) / count;
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
      return profiling ? chunk : Math.max(1, Math.min(500, Math.round(300 / stepMs)));
    });
    if (latest) {
      if (!this.loop.aborted) await this.task(() => this.finish());   // a Stop wants nothing more
      this.state(false);
    }
    if (this.failed) post(`${this.name}-error`, { text: this.failed });
    this.failed = null;
  }
}

// ---- the MNIST view

const MNIST_FILES = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'];
let mnist = null;         // a mnist_view.View: the data on the GPU and the Trainer
let mnistAsked = 0;       // new models asked for: only the latest says it is ready

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
  const { model, lr, batch, test, seed, step } = settings;  // the controls' strings
  await call(mnist.configure, model, Number(lr), Number(batch), Number(test), Number(seed), step === 'replayed');
  mnistTraining.restart();
  await testNewModel();
}

async function mnistLoadWeights(data, name) {
  mnistTraining.loop.stop();
  const model = await call(mnist.load_weights, data, name);
  mnistTraining.restart();
  post('mnist-loaded', { model });
  await testNewModel();
}

// Testing a fresh CNN on 10,000 digits takes half a minute on a software GPU: say so (the page's Train
// waits for 'mnist-ready').
async function testNewModel() {
  post('mnist-status', { text: `Testing the new model on ${mnist.trainer.test_size.toLocaleString('en')} digits…` });
  await mnistTraining.evaluate();
}

// The task of a message that makes a new model: 'mnist-ready' once it is tested, unless a newer one
// was asked for meanwhile (the page waits for that one).
function newMnistModel(make) {
  const asked = ++mnistAsked;
  return mnistTraining.task(async () => {
    await make();
    if (asked === mnistAsked) post('mnist-ready');
  });
}

const mnistMessages = {
  'mnist-configure': ({ settings }) => newMnistModel(() => mnistConfigure(settings)),
  'mnist-train': ({ steps, newRun }) => startRun(() => mnistTraining.train(steps, newRun)),  // after a pending configure
  'mnist-pause': () => mnistTraining.loop.stop(),
  'mnist-profile': () => mnistTraining.profiler.ask(),
  'mnist-predict': ({ pixels }) => mnistTraining.task(async () => {
    if (!mnist?.trainer) return;
    const data = await call(mnist.trainer.predict, pixels);
    post('mnist-probs', { data }, [data.buffer]);
  }),
  'mnist-save': () => mnistTraining.task(async () => {
    const data = await call(mnist.trainer.weights);
    post('mnist-weights', { data, model: mnist.trainer.kind }, [data.buffer]);
  }),
  'mnist-load': ({ data, name }) => newMnistModel(() => mnistLoadWeights(data, name)),
};

// ---- the language-model view

let lm = null;            // an lm_view.View: the Session that Train trains
let corpora = null;       // the site's corpora/index.json: each corpus's files
const corporaHere = new Set();  // the corpora written to Pyodide's file system
let sampling = null;      // the page's latest sampling settings (worker.js lists them)
let lmAsked = 0;          // new models asked for: an evaluation of an older one gives up between batches

const lmTraining = new class extends PlannedTraining {
  constructor() {
    super('lm');
    this.sampledAt = -1;   // the step count of the sample and attention maps shown
  }

  trainer() { return lm?.session; }

  // Minutes long for a large model on a software GPU: the page hears each batch, and a newer model
  // asked for meanwhile (its message comes in while Python waits for the GPU) ends it.
  async evaluation() {
    const asked = lmAsked;
    const data = await call(lm.session.evaluate, (done, total) => {
      if (asked !== lmAsked) return false;
      post('lm-testing', { done, total });
      return true;
    });
    if (data) post('lm-eval', { data }, [data.buffer]);
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
  const asked = lmAsked;
  await lmTraining.evaluate();
  if (asked !== lmAsked) return null;   // a newer model comes next
  post('lm-status', { text: 'Writing a sample…' });
  await lmTraining.show();
  post('lm-ready', { text: done });
  return null;
}

// The task of a message that makes a new model: an evaluation under way gives up for it.
function newModel(task, script) {
  lmAsked++;
  return lmTraining.task(task, script);
}

const lmMessages = {
  'lm-configure': ({ settings }) => newModel(async () => {
    await loadCorpus(settings.corpus);
    await lmStart('configure', () => call(lm.configure, JSON.stringify(settings)), 'Ready: press Train');
  }),
  // Your own text chosen and none given yet: no model (a run of the last one ends untested).
  'lm-drop': () => newModel(async () => {
    lmTraining.loop.stop(true);
    if (lm) await call(lm.drop);
    lmTraining.restart();
    post('lm-session', { info: null, why: 'configure' });
  }),
  'lm-text': ({ text }) => lmTraining.task(async () => py.FS.writeFile('/home/pyodide/input.txt', text)),
  'lm-run': ({ source }) => newModel(async () => {
    const error = await lmStart('run', () => call(lm.run, source), 'Your script ran: Train trains its model further');
    post('lm-ran', { error });
  }, 'lm'),
  'lm-train': ({ steps, newRun }) => startRun(() => lmTraining.train(steps, newRun)),  // after a pending configure
  'lm-pause': () => lmTraining.loop.stop(),
  'lm-profile': () => lmTraining.profiler.ask(),
  'lm-sample': () => lmTraining.task(async () => { if (lm?.session) await lmTraining.show(); }),
  'lm-sampling': () => {},   // onmessage took its settings
  'lm-save': ({ corpus }) => lmTraining.task(async () => {
    const data = await call(lm.session.weights, corpus);
    post('lm-weights', { data }, [data.buffer]);
  }),
  'lm-load': ({ data, name }) => newModel(
    () => lmStart('load', () => call(lm.load_weights, data, name), `Loaded ${name}: Train goes on from it`)),
};
// Python is ready (pyodide): the views' messages can run.
export function startViews(pyodide) {
  py = pyodide;
}

// Handles msg if it is a view's (returns whether it was); each lm-* one carries the sampling settings.
export function viewMessage(msg) {
  if (msg.sampling) sampling = msg.sampling;
  const handle = mnistMessages[msg.type] ?? lmMessages[msg.type];
  handle?.(msg);
  return Boolean(handle);
}

export const viewLoops = [mnistTraining.loop, lmTraining.loop];

// After a Stop: whether each view still has a model to train; where: in the language model's script.
export function viewsStopped(where) {
  post('mnist-stopped', { model: Boolean(mnist?.trainer) });
  post('lm-stopped', { model: Boolean(lm?.session), where });
}
