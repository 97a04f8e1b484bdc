// The page's worker: Pyodide, webgrad and the GPU live here, so training never blocks the page.
//
// Everyone's messages:
//   in:  {type: 'interrupt', buffer} (first: Stop's shared byte, see worker_python.js), {type: 'stop'}
//   out: {type: 'status', text}, {type: 'adapter', info} (before Python loads), {type: 'ready', adapter, isSoftware, loadMs},
//        {type: 'no-webgpu', reason}, {type: 'device-lost', reason},
//        {type: 'busy', busy, script} (something to stop; the view whose code panel's script runs, or null),
//        {type: 'memory', stats} (webgrad.memory_stats()), {type: 'error', text},
//        {type: 'stopped', where, playable, steps}, {type: 'mnist-stopped', model}, {type: 'lm-stopped', model, where}
//        (after a Stop: where the interrupt landed in the panel's script run by Run, or '', whether each
//        view still has a model to train, the toy's step count)
// The toy playground's:
//   in:  {type: 'load', source, play}, {type: 'reset', play}, {type: 'run', source},
//        {type: 'play' | 'pause' | 'step'}, {type: 'profile'} (profile the next steps Play trains)
//   out: {type: 'points', data}, {type: 'frame', data}, {type: 'state', playing},
//        {type: 'profile', profile} (worker_python.js's StepProfiler says what it holds),
//        {type: 'stdout' | 'stderr', text}, {type: 'ran', ok, run, fresh, playable} (after each load: whether
//        the script ran without an error, whether it was Run's, whether its model is now the one drawn,
//        whether there is a model for Play to train)
// The MNIST view's (web/mnist_view.py does the Python side):
//   in:  {type: 'mnist-configure', settings: {model, lr, batch, steps, test, seed}} (the first one
//        loads the data), {type: 'mnist-train', steps, newRun}, {type: 'mnist-pause' | 'mnist-save' | 'mnist-profile'},
//        {type: 'mnist-predict', pixels}, {type: 'mnist-load', data, name}
//   out: {type: 'mnist-status', text}, {type: 'mnist-data', images, labels} (the test set, headers
//        stripped), {type: 'mnist-progress', data: [steps, loss, accuracy], stepMs},
//        {type: 'mnist-eval', steps, predictions}, {type: 'mnist-state', training, plan},
//        {type: 'mnist-probs', data}, {type: 'mnist-weights', data, model},
//        {type: 'mnist-loaded', model}, {type: 'mnist-ready'} (a new model, configured or loaded, is tested),
//        {type: 'mnist-error', text}, {type: 'mnist-profile', profile}
// The language model's (web/lm_view.py does the Python side): each message in carries sampling:
// {prompt, length, temperature, topK, every} (what the samples start from and how they are drawn,
// every: the steps between two while training).
//   in:  {type: 'lm-configure', settings} (a fresh model; settings as lm_view.script takes them),
//        {type: 'lm-text', text} (the user's own text, for the next configure), {type: 'lm-run', source},
//        {type: 'lm-drop'} (no model: the user's own text is chosen and none given yet),
//        {type: 'lm-train', steps, newRun}, {type: 'lm-pause'}, {type: 'lm-sample'} (a sample now), {type: 'lm-profile'},
//        {type: 'lm-sampling'} (the sampling settings alone),
//        {type: 'lm-save', corpus}, {type: 'lm-load', data, name}
//   out: {type: 'lm-status', text}, {type: 'lm-session', info, why: 'configure' | 'run' | 'load'} (info null: no model),
//        {type: 'lm-ready', text} (a new model is tested and has written its first sample),
//        {type: 'lm-progress', data: [steps, loss], stepMs}, {type: 'lm-eval', data: [steps, loss]},
//        {type: 'lm-testing', done, total} (an evaluation's batches so far, of total or null),
//        {type: 'lm-state', training, plan}, {type: 'lm-sample', sample}, {type: 'lm-attention', maps},
//        {type: 'lm-weights', data}, {type: 'lm-ran', error: the script's traceback or null},
//        {type: 'lm-error', text}, {type: 'lm-profile', profile}
// (worker_views.js does the MNIST and language-model views' part.)
import { loadPyodide } from './pyodide/pyodide.mjs';
import { Bridge, describe, findAdapter } from './bridge.js';
import { call, ChunkedLoop, fetchOk, post, PROFILE_STEPS, sentBeforeStop, serial, showMemory, startRun, StepProfiler,
         stop, watchInterrupt, watchMemory, watchOutput, watchProfiles } from './worker_python.js';
import { CORPORA, startViews, viewLoops, viewMessage, viewsStopped } from './worker_views.js';

const status = (text) => post('status', { text });

const PAGE_MODULES = ['playground.py', 'mnist_view.py', 'lm_view.py', 'weights_file.py', 'step_profile.py'];

let py = null;
let interrupt = null;   // Stop's shared byte (Uint8Array), when the page is cross-origin isolated
let bridge = null;      // the WebGPU driver's browser side (bridge.js)
let playground = null;  // the Python module web/playground.py
let session = null;     // a playground.Session: the script's namespace and the step count
let source = '';        // the script the session came from; Reset runs it again
let countingSteps = null;  // the Python function below that makes a Session (see PAGE_PYTHON)
let warmUp = null;         // PAGE_PYTHON's warm_up

// The toy's Python calls: an error stops Play and shows under the code (after Play's end, whose
// 'state' would say 'Paused' over it).
let playFailed = null;
const toyTask = (task, script = null) => serial(task, (e) => {
  if (playLoop.running) {
    playLoop.stop();
    playFailed = e.message;
  } else {
    post('error', { text: e.message });
  }
}, script);
const playLoop = new ChunkedLoop(toyTask);
const toyProfiler = new StepProfiler('');

// Python the worker runs once webgrad is installed. The page always computes on webgpu, even on a
// software adapter (natively that would mean cpu). The torch alias: "import torch" gives webgrad,
// so PyTorch code pasted into a code panel runs as written. session_counting_steps makes a Session
// whose step count includes the script's own calls of train_step() (its main block trains when Run
// runs it): sys.monitoring sees each function start once and is told to ignore all but train.py's
// train_step, so the script runs at full speed.
const PAGE_PYTHON = `
import builtins, json, os, sys
os.environ["WEBGRAD_DEVICE"] = "webgpu"
os.environ["WEBGRAD_NAMES"] = "${CORPORA}/names"
os.environ["WEBGRAD_SHAKESPEARE"] = "${CORPORA}/shakespeare"
import webgrad
import webgrad.torch_alias
webgrad.torch_alias.install()


def session_counting_steps(make, *args):
    mon, calls = sys.monitoring, 0

    def started(code, offset):
        nonlocal calls
        if code.co_name != "train_step" or code.co_filename != "train.py":
            return mon.DISABLE
        calls += 1

    mon.use_tool_id(mon.PROFILER_ID, "webgrad page")
    try:
        mon.restart_events()
        mon.register_callback(mon.PROFILER_ID, mon.events.PY_START, started)
        mon.set_events(mon.PROFILER_ID, mon.events.PY_START)
        session = make(*args)
    finally:
        mon.free_tool_id(mon.PROFILER_ID)
    session.steps = calls
    return session


def memory_stats():
    return json.dumps(webgrad.memory_stats())


def flush_output():
    """Shows a script's last line of output that has no newline yet (print(..., end=""), a prompt):
    Pyodide holds such a line back until a newline, which the next run would print."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        os.fsync(stream.fileno())


# No keyboard reaches Python in the page (stdin is at its end): input() says so, naming itself.
def _no_input(prompt=""):
    raise EOFError("input() cannot read in this page: no keyboard input reaches Python here, "
                   "so write the value into the script instead")


builtins.input = _no_input


def warm_up(source):
    """Starts the compiles of a training step's kernels before Play asks for them: one step of a
    throwaway session of source, whose work the driver drops (compiling_ahead), so this returns at
    once and the compiles go on while the page waits. The random state is left as it was, so the
    real session trains as it would without."""
    import gc
    import playground
    driver, state = backend.runtime.driver, webgrad.get_rng_state()
    driver.compiling_ahead = True
    try:
        scratch = playground.Session(source)
        if scratch.playable:
            scratch.step(1)
    except Exception:
        pass   # the values are dropped, so a script may fail here; the real session has run it fine
    finally:
        driver.compiling_ahead = False
        webgrad.set_rng_state(state)
        scratch = None
        gc.collect()   # the script's namespace holds itself (its functions' globals): free its buffers now


# Stop's interrupt can land while Python is between the worker's calls, in a callback of Pyodide's
# event loop, where nothing of the user's runs: it is dropped there, not raised as an uncaught error.
import asyncio
_loop = asyncio.get_event_loop()
assert hasattr(_loop, "_keyboard_interrupt_handler"), "this Pyodide's event loop takes no KeyboardInterrupt handler"
_loop._keyboard_interrupt_handler = lambda: None


backend = webgrad.get_backend("webgpu")
json.dumps({"adapter": backend.info, "isSoftware": backend.is_software})`;

async function start() {
  // WebGPU first: a browser without it (or without an adapter) hears so before Python loads.
  let adapter;
  try {
    adapter = await findAdapter();
  } catch (e) {
    const reasons = { 'no-webgpu': 'This browser does not expose WebGPU (navigator.gpu is missing).',
                      'no-adapter': 'WebGPU is on, but the browser offered no GPU adapter.' };
    post('no-webgpu', { reason: reasons[e.message.split(':')[0]] ?? e.message });
    return;
  }
  post('adapter', { info: describe(adapter) });
  status('Loading Python (Pyodide)…');
  const t0 = performance.now();
  const pyodide = await loadPyodide({ indexURL: new URL('./pyodide/', import.meta.url).href });
  pyodide.setStdout({ batched: (text) => post('stdout', { text }) });
  pyodide.setStderr({ batched: (text) => post('stderr', { text }) });
  pyodide.setStdin({ stdin: () => null });   // no keyboard reaches Python here: a read finds the end of input

  status('Installing webgrad…');
  const [wheel, ...modules] = await Promise.all([fetchOk('webgrad.whl').then((r) => r.arrayBuffer()),
                                                 ...PAGE_MODULES.map((m) => fetchOk(m).then((r) => r.text()))]);
  const sitePackages = pyodide.runPython('import site; site.getsitepackages()[0]');
  pyodide.unpackArchive(wheel, 'wheel', { extractDir: sitePackages });
  PAGE_MODULES.forEach((m, i) => pyodide.FS.writeFile(`/home/pyodide/${m}`, modules[i]));

  status('Opening the GPU…');
  bridge = new Bridge(adapter);
  bridge.interrupt = interrupt;
  bridge.onError = (text) => post('error', { text });
  bridge.onLost = (reason) => post('device-lost', { reason });
  pyodide.registerJsModule('webgrad_bridge', { bridge });
  let info;
  try {
    info = await pyodide.runPythonAsync(PAGE_PYTHON);
    playground = pyodide.pyimport('playground');
    countingSteps = pyodide.globals.get('session_counting_steps');
    warmUp = pyodide.globals.get('warm_up');
    watchMemory(pyodide.globals.get('memory_stats'));
    watchOutput(pyodide.globals.get('flush_output'));
    watchProfiles(pyodide.pyimport('step_profile').profiled);
  } catch (e) {
    post('no-webgpu', { reason: e.message });
    return;
  }
  watchInterrupt(pyodide, interrupt);
  py = pyodide;
  startViews(py);
  post('ready', { ...JSON.parse(info), loadMs: performance.now() - t0 });
}

// Runs text (the controls' script, or the user's with Run) as a new session and sends its points and
// a first frame. A script that raises, or lacks what Play needs, leaves the current session (the
// model drawn) as it was; 'ran' says which.
async function load(text, runMain) {
  playLoop.stop();
  const next = await call(countingSteps, playground.Session, text, runMain);
  const [error, fresh] = [next.error, next.playable];
  if (error) post('error', { text: error });
  else if (next.missing) post('stderr', { text: next.missing });
  if (fresh) {
    session?.destroy();
    toyProfiler.fresh();
    [session, source] = [next, text];
    const points = await call(session.points);
    post('points', { data: points }, [points.buffer]);
    await frame();
    showMemory(true);
  } else {
    next.destroy();
  }
  post('ran', { ok: !error, run: runMain, fresh, playable: session !== null });
}

async function frame() {
  const data = await call(session.frame);
  post('frame', { data }, [data.buffer]);
}

// Play trains in chunks of steps, each followed by a frame. The chunk grows until training takes
// two thirds of the time: a frame costs the same however many steps came before it. A chunk that
// the profiler takes is its few steps, profiled (slower: the next chunk's size stays).
async function play() {
  if (playLoop.running || !session) return;
  post('state', { playing: true });
  const latest = await playLoop.run(async (perFrame) => {
    if (toyProfiler.due(session.steps)) {
      await toyProfiler.run(session.step, PROFILE_STEPS, session.steps);
      await frame();
      return perFrame;
    }
    const t0 = performance.now();
    await call(session.step, perFrame);
    const t1 = performance.now();
    await frame();
    const stepMs = (t1 - t0) / perFrame;
    const frameMs = performance.now() - t1;
    return Math.max(1, Math.min(512, Math.round(Math.max(2 * frameMs, 60) / stepMs)));
  });
  if (latest) post('state', { playing: false });
  if (playFailed) post('error', { text: playFailed });
  playFailed = null;
}

const toyMessages = {
  pause: () => playLoop.stop(),
  profile: () => toyProfiler.ask(),
  play: () => startRun(play),  // after a pending load
  step: () => toyTask(async () => {
    if (!session) return;
    await call(session.step, 1);
    await frame();
  }),
  // a new session while playing goes on playing (the app says so with play: true), once it is made
  load: ({ source: text, play: playing }) => loadAndPlay(text, playing),
  reset: ({ play: playing }) => loadAndPlay(source, playing),
  run: ({ source: text }) => toyTask(() => load(text, true), 'playground'),
};

function loadAndPlay(text, playing) {
  toyTask(() => load(text, false));
  if (playing) startRun(play);
  else serial(warm, (e) => post('error', { text: e.message }), null, true);
}

// Compiling a step's kernels takes seconds on a software adapter (SwiftShader: ~1 s a matmul), so a
// new session's are started once its first frame is shown; Python is back in milliseconds (the
// page is not busy with it), and Play's first step waits only for what is left.
async function warm() {
  if (session && session.steps === 0) await call(warmUp, source);
}

// Stop (worker_python.js); then a frame shows the model that Play trained as the interrupt left it.
async function stopEverything() {
  const playing = playLoop.running;
  const interrupted = await stop([playLoop, ...viewLoops], interrupt);
  const where = (panel) => (interrupted && (interrupted.panel ?? panel) === panel ? interrupted.where : '');
  post('stopped', { where: where('train'), playable: session !== null, steps: session?.steps ?? 0 });
  viewsStopped(where('lm'));
  if (playing && session) toyTask(frame);
}

onmessage = ({ data: msg }) => {
  if (msg.type === 'interrupt') {   // the page's first message, usually before Python is ready
    interrupt = msg.buffer;
    watchInterrupt(null, interrupt);
    if (bridge) bridge.interrupt = interrupt;
    return;
  }
  if (!py) return;
  if (msg.type === 'stop') stopEverything();
  else if (sentBeforeStop()) return;
  else if (!viewMessage(msg)) toyMessages[msg.type]?.(msg);
};

start().catch((e) => post('error', { text: `The playground could not start: ${e.message}` }));
