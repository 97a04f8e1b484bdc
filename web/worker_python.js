// The worker's way into Python, shared by the toy playground (worker.js) and the views that train to
// a plan (worker_views.js): one queue of tasks, training loops in chunks of it, and Stop.
//
// Stop: the page writes SIGINT into a shared byte and sends 'stop'; stop() then ends the loops, drops
// the tasks queued before it and, once the running task has ended, answers 'stopped'. The running task
// hears the byte at its next wait for the GPU, which gives up (bridge.js) and raises KeyboardInterrupt
// (browser.py). A task that runs a code panel's script (Run) hears it anywhere in Python too: Pyodide polls
// the byte (its interrupt buffer) while that task runs, as an endless loop there may never wait for
// the GPU. Nowhere else (training, evaluations, frames): an interrupt at any bytecode can land inside
// a generator, which Python then ends for good (a trainer's batches: its next step raised
// StopIteration), or halfway through the runtime's bookkeeping; at a GPU wait neither is under way.
// A task that never ends (an await that never resolves, a loop that swallows the interrupt or waits
// for no GPU) gets no answer out: the page ends this worker and starts another.

export const post = (type, data = {}, transfer = []) => postMessage({ type, ...data }, transfer);

// A Python call that may block on the GPU must go through callPromising (JSPI stack switching).
export const call = (fn, ...args) => fn.callPromising(...args);

// Whether an error is Stop's KeyboardInterrupt (Pyodide's PythonError names the exception's type).
export const isInterrupt = (e) => e?.type === 'KeyboardInterrupt';

// Python is entered through this one queue: a call suspended in run_sync (awaiting the GPU) lets the
// event loop run, and a second Python call must not start then.
let queue = Promise.resolve();
let pending = 0;          // tasks queued or running
let epoch = 0;            // Stops so far: a task queued before a Stop does not run
const runs = new Set();   // training runs under way (each queues chunk after chunk)
let busyShown = false;
let scriptView = null;    // the view ('playground' or 'lm') whose code panel's script runs now, or null
let scriptShown = null;
let stopComing = false;   // an interrupt landed, and the 'stop' the page sent with it has not come yet
let interruptedAt = null; // where the last interrupt landed in a Run's script: {panel, where}
let python = null;        // Pyodide, once it is ready, and Stop's shared byte: see the top
let interruptByte = null;

// Pyodide and Stop's byte (each once it exists, in either order).
export function watchInterrupt(pyodide, byte) {
  python = pyodide ?? python;
  interruptByte = byte ?? interruptByte;
}

// The page enables its Stop buttons while the worker has something to stop ('busy' {busy}), and
// says in the other views that their work waits while a code panel's script runs ({script}: its view).
function showBusy() {
  const busy = pending > 0 || runs.size > 0;
  if (busy === busyShown && scriptView === scriptShown) return;
  [busyShown, scriptShown] = [busy, scriptView];
  post('busy', { busy, script: scriptView });
}

// Whether a message the page sent came before a Stop whose interrupt has landed: a script's Python
// that never waits (an endless loop) keeps the worker from hearing messages, so those sent meanwhile
// (a tab's first configure) come first, and the 'stop' after them. The worker drops them, as stop()
// drops the tasks queued before it; running one would keep 'stopped' back until it ended, and the
// page would restart Python.
export const sentBeforeStop = () => stopComing;

// Queues task; an error it throws goes to onError, except Stop's interrupt, which ends it quietly
// (and, for a task that runs a code panel's script, says where in the script it landed: only such a
// task is interrupted anywhere in Python, see the top). script: the view ('playground' or 'lm') whose
// script the task runs, or null. A task in the background (work done ahead, such as compiling
// kernels) does not make the page busy.
export function serial(task, onError, script = null, background = false) {
  const at = epoch;
  const counted = background ? 0 : 1;
  pending += counted;
  showBusy();
  queue = queue.then(async () => {
    if (at !== epoch) return;
    python?.setInterruptBuffer(script ? interruptByte : undefined);
    scriptView = script;
    showBusy();
    try {
      await task();
    } finally {
      python?.setInterruptBuffer(undefined);
      scriptView = null;
      if (script) flushFn?.();
    }
  }).catch((e) => {
    // Stop's interrupt (the page marks a Stop it sent); a KeyboardInterrupt a script raised itself is
    // its error like any other: no 'stop' comes after it
    if (isInterrupt(e) && interruptByte !== null && Atomics.load(interruptByte, 1) === 1) {
      interruptedAt = script ? scriptLine(e.message) : null;
      stopComing = true;
    } else {
      onError(e);
    }
  }).finally(() => {
    pending -= counted;
    showBusy();
  });
  return queue;
}

// Where a traceback left a code panel's script (train.py: the toy's, lm.py: the language model's):
// {panel: 'train' | 'lm' | null, where: 'at line N of your script' or 'in your script'}.
function scriptLine(traceback) {
  const lines = [...traceback.matchAll(/File "(train|lm)\.py", line (\d+)/g)];
  const last = lines.at(-1);
  return last ? { panel: last[1], where: `at line ${last[2]} of your script` } : { panel: null, where: 'in your script' };
}

// A training run (a loop and what follows it), started once the tasks queued before it have run
// (a pending configure), unless a Stop came first; work under way until it settles.
export function startRun(start) {
  const at = epoch;
  return queue.then(() => {
    if (at !== epoch) return;
    const run = start();
    runs.add(run);
    showBusy();
    return run.finally(() => {
      runs.delete(run);
      showBusy();
    });
  });
}

// A code panel's script's output ends with it (flushFn: worker.js's flush_output, once Python is ready).
let flushFn = null;
export function watchOutput(fn) {
  flushFn = fn;
}

// The GPU memory webgrad holds (the page shows it): statsFn is webgrad.memory_stats as JSON, once
// Python is ready; shown after chunks of training, at most once a second, and when asked (force).
let statsFn = null;
let memoryShownAt = -Infinity;
export function watchMemory(fn) {
  statsFn = fn;
}

// Call it only from a task of the queue (it enters Python).
export function showMemory(force = false) {
  if (!statsFn || (!force && performance.now() - memoryShownAt < 1000)) return;
  memoryShownAt = performance.now();
  post('memory', { stats: JSON.parse(statsFn()) });
}

// "Where the time goes" (time_chart.js draws it): a view's training profiles PROFILE_STEPS steps
// (step_profile.py) once its model has trained AUTO_AFTER steps here, and again whenever the page
// asks ('<view>-profile' in); the next chunk of training is then those steps, profiled, and the
// worker answers '<view>-profile' {profile: step_profile.profiled's, first, last: the steps profiled}.
// Never the first step of a model here: its kernels compile then, and the waits would count.
// (The page's panel imports these two to say so.)
export const PROFILE_STEPS = 3;
export const AUTO_AFTER = 10;
let profiledFn = null;   // step_profile.profiled, once Python is ready
export function watchProfiles(fn) {
  profiledFn = fn;
}

export class StepProfiler {
  constructor(prefix) {
    this.prefix = prefix;   // the view's messages': '', 'mnist-' or 'lm-'
    this.fresh();
  }

  // A new model: profiled once more after its first steps (a request for the last one is dropped,
  // as the page's panel starts over too).
  fresh() {
    this.firstSteps = null;   // the model's step count when it first trained here
    this.profiled = false;
    this.asked = false;       // the page asked for a profile of the next steps
  }

  ask() {
    this.asked = true;
  }

  // Whether the chunk of training that starts at the model's step count steps is to be profiled.
  due(steps) {
    this.firstSteps ??= steps;
    const trained = steps - this.firstSteps;
    return Boolean(profiledFn) && trained > 0 && (this.asked || (!this.profiled && trained >= AUTO_AFTER));
  }

  // Runs step(count) (a view's Python step function, from the model's step count steps) profiled,
  // posts the profile, and returns what step returned. Call it only from a task of the queue.
  async run(step, count, steps) {
    [this.asked, this.profiled] = [false, true];
    const [result, profile] = await call(profiledFn, step, count);
    post(`${this.prefix}profile`, { profile: { ...JSON.parse(profile), first: steps + 1, last: steps + count } });
    return result;
  }
}

// Training in chunks of steps, each chunk a task of the queue into Python, so that a Pause (stop)
// or any other message gets in between chunks. One loop runs at a time: Pause, or a newer run,
// ends it; Stop aborts it (nothing runs after it, such as an evaluation).
export class ChunkedLoop {
  constructor(task) {
    this.task = task;       // (async () => {...}) => Promise: runs it in the queue into Python
    this.running = false;
    this.aborted = false;
    this.generation = 0;    // the running loop's number
  }

  // Trains chunk(count) after chunk(count) until stopped: each returns the next one's step count.
  // Resolves to whether this loop was still the latest when it ended (a newer one says nothing).
  async run(chunk) {
    this.running = true;
    this.aborted = false;
    const me = ++this.generation;
    const current = () => this.running && me === this.generation;
    let count = 1;
    while (current()) {
      await this.task(async () => {
        if (!current()) return;
        count = await chunk(count);
        showMemory();
      });
      await new Promise((resolve) => setTimeout(resolve, 0));  // let a Pause in
    }
    return me === this.generation;
  }

  stop(abort = false) {
    this.running = false;
    this.aborted ||= abort;
  }
}

// Stop (see the top): resolves, once nothing runs, to where the interrupt landed in a script run by
// Run (scriptLine's), or null when it stopped something else, or nothing. interrupt: the shared byte, cleared then, so
// that it cannot interrupt the next call.
export async function stop(loops, interrupt) {
  epoch++;
  for (const loop of loops) loop.stop(true);
  await Promise.allSettled([...runs]);
  await serial(async () => {}, () => {});
  if (interrupt) {
    Atomics.store(interrupt, 0, 0);
    Atomics.store(interrupt, 1, 0);
  }
  const where = interruptedAt;
  interruptedAt = null;
  stopComing = false;
  return where;
}

export async function fetchOk(path) {
  const response = await fetch(new URL(path, import.meta.url), { cache: 'no-cache' });
  if (!response.ok) throw new Error(`could not load ${path}: HTTP ${response.status}`);
  return response;
}

// A gzipped file of the site, decompressed as it streams in.
export async function gunzip(path) {
  const stream = (await fetchOk(path)).body.pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
