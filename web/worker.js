// The page's worker: Pyodide, webgrad and the GPU live here, so training never blocks the page.
//
// Messages in:  {type: 'load', source, play}, {type: 'reset', play}, {type: 'run', source},
//               {type: 'play' | 'pause' | 'step'}
// Messages out: {type: 'status', text}, {type: 'ready', adapter}, {type: 'no-webgpu', reason},
//               {type: 'points', data}, {type: 'frame', data}, {type: 'state', playing},
//               {type: 'stdout' | 'stderr', text}, {type: 'error', text}, {type: 'ran', ok}
import { loadPyodide } from './pyodide/pyodide.mjs';
import { Bridge } from './bridge.js';

const post = (type, data = {}, transfer = []) => postMessage({ type, ...data }, transfer);
const status = (text) => post('status', { text });

let py = null;
let playground = null;  // the Python module web/playground.py
let session = null;     // a playground.Session: the script's namespace and the step count
let source = '';        // the script the session came from; Reset runs it again
let playing = false;

// Python is entered through this one queue: a call suspended in run_sync (awaiting the GPU) lets
// the event loop run, and a second Python call must not start then.
let queue = Promise.resolve();
const serial = (task) => (queue = queue.then(task).catch((e) => {
  playing = false;
  post('error', { text: e.message });
}));
// A Python call that may block on the GPU must go through callPromising (JSPI stack switching).
const call = (fn, ...args) => fn.callPromising(...args);

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
  const [wheel, page] = await Promise.all([fetchOk('webgrad.whl').then((r) => r.arrayBuffer()),
                                           fetchOk('playground.py').then((r) => r.text())]);
  const sitePackages = py.runPython('import site; site.getsitepackages()[0]');
  py.unpackArchive(wheel, 'wheel', { extractDir: sitePackages });
  py.FS.writeFile('/home/pyodide/playground.py', page);

  status('Opening the GPU…');
  const bridge = new Bridge();
  bridge.onError = (text) => post('error', { text });
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
  playing = false;
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
let loop = 0;  // the running play loop's number: Pause, or a newer loop, ends it
async function play() {
  if (playing || !session?.playable) return;
  playing = true;
  const me = ++loop;
  post('state', { playing });
  let perFrame = 1;
  while (playing && me === loop) {
    await serial(async () => {
      if (!playing || me !== loop) return;
      const t0 = performance.now();
      await call(session.step, perFrame);
      const t1 = performance.now();
      await frame();
      const stepMs = (t1 - t0) / perFrame;
      const frameMs = performance.now() - t1;
      perFrame = Math.max(1, Math.min(512, Math.round(Math.max(2 * frameMs, 60) / stepMs)));
    });
    await new Promise((resolve) => setTimeout(resolve, 0));  // let a Pause in
  }
  if (me === loop) post('state', { playing: false });
}

onmessage = ({ data: msg }) => {
  if (!py) return;
  if (msg.type === 'pause') playing = false;
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
