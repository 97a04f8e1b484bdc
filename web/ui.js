// What the page's views share: element lookup, the parts of index.html they repeat, files in and
// out, the code panels' output, the status lines, progress bars and toggles, and the worker with
// its Stop buttons.

export const $ = (id) => document.getElementById(id);

// The parts that views repeat (index.html's <template>s): each <div data-template="NAME" data-KEY=…>
// becomes a copy of the template NAME, with {KEY} in it read as that placeholder's data-KEY. It
// runs as this module loads, so every view finds its elements in place.
for (const slot of document.querySelectorAll('[data-template]')) {
  const { template, ...values } = slot.dataset;
  slot.outerHTML = $(template).innerHTML.trim().replace(/\{(\w+)\}/g, (_, key) => {
    if (!(key in values)) throw new Error(`index.html: the ${template} placeholder has no data-${key}`);
    return values[key];
  });
}

// Offers bytes to the user as a download named name.
export function saveFile(data, name) {
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([data], { type: 'application/octet-stream' }));
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

// The file chosen in a file input, as {name, data: Uint8Array}, or null; the input is cleared, so
// that choosing the same file again is a change too.
export async function takeFile(input) {
  const file = input.files[0];
  input.value = '';
  return file ? { name: file.name, data: new Uint8Array(await file.arrayBuffer()) } : null;
}

// A line of a code panel's output (kind: 'error' or 'note' colours it), kept in view.
export function printTo(output, text, kind) {
  const line = document.createElement('span');
  line.textContent = text + '\n';
  if (kind) line.className = kind;
  output.append(line);
  output.scrollTop = output.scrollHeight;
}

// A tab's status line shows text styled by kind ('', 'error', ...).
export function showStatus(id, text, kind = '') {
  $(id).textContent = text;
  $(id).className = `status ${kind}`;
}

// A tab's Train/Pause toggle (`${prefix}-train`, `${prefix}-pause`), and the controls (ids) a busy
// worker disables. While a new model is prepared (preparing: made and tested), the controls in
// waitForModel are off too: pressed then, they would wait behind it, saying nothing. What asks for
// another model stays on.
export function showBusy(prefix, ids, busy, training, preparing = false, waitForModel = []) {
  for (const id of ids) $(id).disabled = busy;
  if (preparing) for (const id of waitForModel) $(id).disabled = true;
  showToggle($(`${prefix}-train`), $(`${prefix}-pause`), training, busy || !training);
}

// A Play/Pause pair as one toggle: Pause shows while running, Play otherwise. The keyboard focus
// follows to the one shown.
export function showToggle(play, pause, running, pauseDisabled) {
  pause.disabled = pauseDisabled;
  const [shown, gone] = running ? [pause, play] : [play, pause];
  shown.hidden = false;
  gone.hidden = true;
  if (document.activeElement === gone) shown.focus();
}

// MNIST's and the language model's Train-for bars and Train buttons, the same: the run shown is the
// one under way, paused or just ended ({training, plan: the step count it stops at (0: none yet),
// runLength: its steps}) until Train for names another length (length); then it is the next run,
// from here (steps), which Train starts afresh (newRun) instead of going on with the paused one.
export const isNewRun = (length, runLength) => length !== runLength;

// A view's progress bar (`${prefix}-progress`) through the run shown (see isNewRun), and its step count.
export function showRunProgress(prefix, steps, { training, plan, runLength }, length) {
  const next = !training && isNewRun(length, runLength);
  const [end, shownLength] = next ? [steps + length, length] : [plan, runLength];
  const start = end > 0 ? end - shownLength : 0;
  $(`${prefix}-progress`).max = shownLength;
  $(`${prefix}-progress`).value = Math.min(shownLength, Math.max(0, steps - start));
  $(`${prefix}-step-count`).textContent = String(steps);
}

// A seed entered in input that the reader seed (link_settings.js's wholeNumber) will not take goes
// back to the seed in use (inUse), and the status line (statusId) says why. Returns the seed read,
// or undefined for one turned back.
export function enteredSeed(input, seed, inUse, statusId) {
  const value = seed.read(input.value);
  if (value === undefined) {
    input.value = inUse;
    showStatus(statusId, `The seed is ${seed.allowed}: still ${inUse}`, 'error');
  }
  return value;
}

// A readout measured every few seconds (a test accuracy, a validation loss; its element id) says the
// step it is from (`${id}-at`), and is greyed with how often it is measured (every) once training
// has gone past that step.
export function showAge(id, measuredAt, steps, every) {
  const stale = measuredAt !== null && steps > measuredAt;
  $(id).classList.toggle('stale', stale);
  $(`${id}-at`).textContent = measuredAt === null ? '' : `at step ${measuredAt}${stale ? ` (${every})` : ''}`;
}

// What a view's status line says on the worker's '<view>-state' ({training, plan: the step count
// the Train run stops at}): 'Training…' while a run goes on; when one has just ended (wasTraining),
// whether it trained to its plan (stepsDone) or was paused; null otherwise. runLength: the steps
// a press of Train runs.
export function trainingStatus(wasTraining, { training, plan }, stepsDone, runLength) {
  if (training) return 'Training…';
  if (!wasTraining) return null;
  return stepsDone >= plan ? `Trained ${plan} steps: press Train for ${runLength} more` : 'Paused';
}

// Stop gets an answer within this long, or the worker is ended and a fresh one started.
const STOP_GRACE_MS = 1000;
const SIGINT = 2;

// The page's one worker (worker.js: Python and the GPU), with the API of a Worker the views use
// (postMessage, terminate), and the page's Stop buttons (every button.stop): Stop interrupts the
// running Python (see worker_python.js); a worker that has not handled it within STOP_GRACE_MS is
// ended and another started, and receive() hears {type: 'stopped', restarted: true} and the
// views' '<view>-stopped' with model: false. receive() hears the worker's 'busy' too (whose script
// runs). The header shows the adapter and the GPU memory held.
export class PythonWorker {
  constructor(receive) {
    this.receive = receive;   // the views' handling of a message from the worker
    this.stopTimer = 0;
    for (const button of document.querySelectorAll('button.stop')) button.onclick = () => this.stop();
    this.start();
  }

  start() {
    this.worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    this.worker.onmessage = ({ data }) => this.heard(data);
    this.worker.onerror = (e) => this.receive({ type: 'error', text: `The worker failed: ${e.message}` });
    // Shared memory, which the interrupt needs, exists only in a cross-origin isolated page (the
    // server's COOP and COEP headers); without it, Stop reaches Python only between two tasks. Byte 0
    // is Pyodide's signal; byte 1 says a Stop was sent that the worker has not handled yet.
    this.interrupt = globalThis.crossOriginIsolated ? new Uint8Array(new SharedArrayBuffer(2)) : null;
    if (this.interrupt) this.worker.postMessage({ type: 'interrupt', buffer: this.interrupt });
    showStop(false);
  }

  postMessage(message, transfer = []) {
    this.worker?.postMessage(message, transfer);
  }

  endStop() {
    clearTimeout(this.stopTimer);
    this.stopTimer = 0;
  }

  terminate() {
    this.endStop();
    this.worker?.terminate();
    this.worker = null;
    showStop(false);
  }

  heard(message) {
    if (message.type === 'adapter') $('adapter').textContent = adapterName(message.info);
    else if (message.type === 'memory') showMemory(message.stats);
    else {
      if (message.type === 'busy') showStop(message.busy && !this.stopTimer);
      if (message.type === 'stopped') this.endStop();
      this.receive(message);
    }
  }

  stop() {
    if (!this.worker || this.stopTimer) return;
    showStop(false);
    if (this.interrupt) {
      Atomics.store(this.interrupt, 1, 1);
      Atomics.store(this.interrupt, 0, SIGINT);
    }
    this.worker.postMessage({ type: 'stop' });
    this.stopTimer = setTimeout(() => {
      // A worker that has handled the Stop (byte 1 cleared) has its 'stopped' on the way: the page was
      // busy as the grace ended, and its timer may run before a message already sent.
      if (this.interrupt && Atomics.load(this.interrupt, 1) === 0) return;
      this.restart();
    }, STOP_GRACE_MS);
  }

  restart() {
    this.terminate();
    $('gpu-memory').textContent = '';
    this.receive({ type: 'busy', busy: false, script: null });
    this.receive({ type: 'stopped', restarted: true, where: '', playable: false });
    this.receive({ type: 'mnist-stopped', restarted: true, model: false });
    this.receive({ type: 'lm-stopped', restarted: true, model: false });
    this.start();
  }
}

// An adapter as the header names it (bridge.js's describe()).
export const adapterName = (info) => info.name + (info.adapter_type === 'CPU' ? ' (software)' : '');

function showStop(enabled) {
  for (const button of document.querySelectorAll('button.stop')) button.disabled = !enabled;
}

// The GPU memory webgrad holds (webgrad.memory_stats()); the data attributes keep the bytes.
function showMemory({ live_bytes: live, pool_bytes: pool }) {
  const size = (bytes) => (bytes < 2 ** 20 ? `${Math.ceil(bytes / 2 ** 10)} KB` : `${(bytes / 2 ** 20).toFixed(1)} MB`);
  const box = $('gpu-memory');
  box.textContent = `${size(live)} in use`;
  box.title = `GPU memory webgrad holds: ${size(live)} in tensors, ${size(pool)} freed and kept for reuse`;
  Object.assign(box.dataset, { live, pool });
}

// A loss (or a score) as the loss charts' ticks and the readouts beside them write it: in full (a
// tick as it is, a readout to `decimals` places), short of one that has grown huge (a run on its way
// to diverging), and short enough then to fit: three significant digits, 2.01e4, 1e6, 2.5e30.
export function lossText(value, decimals = null) {
  if (Math.abs(value) < 1e4) return decimals === null ? value.toLocaleString('en') : value.toFixed(decimals);
  return Number(value.toPrecision(3)).toExponential().replace('e+', 'e');
}

// A loss chart's y axis: its ticks as lossText writes them, which leaves room for the axis's name.
// Its spacings 1, 2, 2.5 and 5 times a power of ten as uPlot's own, which stop at 5e32 (no ticks at
// all for a loss past about 1e33), up to float32's largest.
const LOSS_INCRS = Array.from({ length: 71 }, (_, i) => [1, 2, 2.5, 5].map((m) => Number(`${m}e${i - 32}`))).flat();
export const lossAxis = (label, size) => ({
  label, size, incrs: LOSS_INCRS, values: (u, ticks) => ticks.map((t) => lossText(t)),
});

// A loss chart's x axis of training steps: whole steps 1-2-5 apart (uPlot's own ticks show 0.2,
// 0.4 ... while a run has few steps).
const STEP_TICKS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6].map((p) => m * p)).sort((a, b) => a - b);
export const stepAxis = (label, size) => ({
  label, size, incrs: STEP_TICKS, values: (u, ticks) => ticks.map((t) => t.toLocaleString('en')),
});
