// The language-model view: train a character-level GPT on a text (first names, Shakespeare, or the
// user's own), watch its training and validation loss, read samples that improve as it learns,
// continue a prompt, look at where each attention head looks, and download or load its weights.
// Python and the GPU run in worker.js (web/lm_view.py); this is the page side, with its settings in
// lm_settings.js and its attention map in lm_attention.js.
import { codeEditor } from './editor.js';
import { attentionMap, shown } from './lm_attention.js';
import { timeChart } from './time_chart.js';
import { STEP_HINT, stepFor } from './step_settings.js';
import { FAST_ON_SOFTWARE, LABELS, LM_CHOICES, lmFromHash, lmToHash, MAX_PROMPT, PROMPTS, SEED, SIZES,
         sizeLabel } from './lm_settings.js';
import uPlot from './uplot/uPlot.esm.js';
import { $, enteredSeed, isNewRun, lossAxis, printTo, saveFile, showAge, showBusy, showRunProgress, showStatus,
         stepAxis, takeFile, trainingStatus } from './ui.js';

const MAX_TEXT = 20e6;   // characters of the user's own text
const PASTE_TEXT = 'Paste a text or choose a file, then press Use this text';
// How lm_view's Refused starts an error's last line: what the user gave (a text, a file) made no model,
// and its message is for them. Other errors are bugs, and keep their type.
const REFUSED = /^lm_view\.Refused: /;

// The view; post sends a message to the worker. Returns {handlers (for the worker's lm-* messages),
// adapter(isSoftware) (once the worker knows it), start() (once the worker is ready), pause(), hash(),
// corrections (what lmFromHash corrected in initialHash)}.
export function lmView(send, initialHash) {
  const corrections = [];
  const settings = lmFromHash(initialHash, corrections);
  settings.prompt ??= PROMPTS[settings.corpus];
  // Every message carries the sampling settings: the worker's samples follow the controls.
  const post = (message, transfer) => send({ ...message, sampling: samplingMessage() }, transfer);
  let isSoftware = false;
  let started = false;
  let training = false;
  let plan = 0;               // the step count the current Train run stops at
  let runLength = 0;          // that run's length in steps (Train for when it started)
  let evaluatedAt = null;     // the step count the validation loss shown is from
  let info = null;            // the worker's account of the model: lm_view.Session.info; null: no model
  let preparing = false;      // a model asked for is on its way: made, tested and writing its first sample
  let loaded = null;          // the model size of a weights file or a script that is none of SIZES, and {from}
  let ownPrompt = null;       // the prompt from a text of the user's on its way: the prompt once it makes a model
  let curves = [[], [], [], []];  // steps, training loss, validation loss, the letter-frequency baseline
  let chart = null;
  let promptTimer = 0;

  // ---- controls

  for (const key of ['corpus', 'lr', 'batch', 'steps', 'every', 'topk', 'step']) {
    $(`lm-${key}`).replaceChildren(...LM_CHOICES[key].map((o) => new Option(LABELS[o] ?? o, o)));
  }
  $('lm-step').title = STEP_HINT;
  showSizes();
  for (const key of ['corpus', 'size', 'lr', 'batch', 'steps', 'step', 'seed', 'every', 'topk', 'temperature']) {
    $(`lm-${key}`).value = settings[key];
    $(`lm-${key}`).addEventListener('change', () => changed(key));
  }
  $('lm-temperature').addEventListener('input', showTemperature);
  $('lm-prompt').value = settings.prompt;
  $('lm-prompt').addEventListener('input', promptChanged);
  $('lm-train').onclick = () => post({ type: 'lm-train', steps: Number(settings.steps),
                                       newRun: isNewRun(Number(settings.steps), runLength) });
  $('lm-pause').onclick = () => {
    post({ type: 'lm-pause' });
    $('lm-pause').disabled = true;
    setStatus('Pausing: the model is tested and writes a sample first…');
  };
  $('lm-reset').onclick = async () => (await mayReplaceCode('You pressed Reset')) && configure();
  $('lm-generate').onclick = sample;
  $('lm-download').onclick = () => post({ type: 'lm-save', corpus: settings.corpus });
  $('lm-upload').onchange = loadWeights;
  $('lm-text-file').onchange = readTextFile;
  $('lm-text').addEventListener('input', showUseText);
  $('lm-use-text').onclick = useText;
  $('lm-run-code').onclick = runCode;
  const code = codeEditor($('lm-code'), { testid: 'lm-code', label: 'Python language-model script', filename: 'lm.py',
                                          run: runCode, badge: $('lm-code-edited') });
  const attention = attentionMap(() => settings.prompt);
  const timePanel = timeChart('lm-', post, 'Train', () => training);
  showTemperature();
  showOwnText();
  setBusy(true);

  // The sizes, briefly (the whole shape is in the title and under the chart); a software GPU's note.
  function showSizes() {
    const options = Object.entries(SIZES).map(([name, c]) => {
      const slow = isSoftware && !FAST_ON_SOFTWARE.includes(name) ? ' (slow here)' : '';
      return new Option(`${name[0].toUpperCase()}${name.slice(1)}: ${sizeLabel(c, true)}${slow}`, name);
    });
    if (loaded) options.push(new Option(`From ${loaded.from}: ${sizeLabel(loaded, true)}`, 'loaded'));
    $('lm-size').replaceChildren(...options);
    $('lm-size').value = loaded ? 'loaded' : settings.size;
    const shape = loaded ?? SIZES[settings.size];   // none until the adapter is known
    $('lm-size').title = shape ? sizeLabel(shape) : '';
    showAdapterNote();
  }

  // On a software GPU the page says so, and warns when a size is slow there (MNIST's note does the same).
  function showAdapterNote() {
    const note = $('lm-adapter-note');
    const slow = !loaded && !FAST_ON_SOFTWARE.includes(settings.size);
    note.hidden = !isSoftware;
    note.textContent = 'This browser offers only a software GPU (it computes on the CPU), so the Tiny and Small '
      + 'models suit it. Medium and Large are far slower here: a Large model takes minutes to test on the '
      + 'validation text and a minute or more for each training step.';
    note.classList.toggle('warn', slow);
  }

  async function changed(key) {
    const value = $(`lm-${key}`).value;
    if (key === 'seed' && enteredSeed($('lm-seed'), SEED, settings.seed, 'lm-status') === undefined) return;
    const makesModel = !['every', 'topk', 'temperature', 'steps'].includes(key);   // configure() below
    const label = $(`lm-${key}`).closest('.field').querySelector('.label').textContent;
    if (makesModel && !(await mayReplaceCode(`You changed “${label}”`))) {
      if (key === 'size') showSizes();   // the code stays, and so does the setting it was made from
      else $(`lm-${key}`).value = settings[key];
      return;
    }
    settings[key] = ['seed', 'temperature'].includes(key) ? Number(value) : value;
    if (key === 'size') {
      loaded = null;
      showSizes();
    }
    if (key === 'corpus') {
      ownPrompt = null;   // a text of the user's on its way is not this corpus's
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
    const { corpus, lr, batch, steps, every, seed, step } = settings;
    const { n_layer, n_head, n_embd, block_size } = loaded ?? SIZES[settings.size];
    return { corpus, lr: Number(lr), batch: Number(batch), steps: Number(steps), every: Number(every), seed,
             replayed: step === 'replayed', n_layer, n_head, n_embd, block_size };
  }

  // Whether a fresh model from the controls may replace the code panel's script (asks when edited).
  function mayReplaceCode(why) {
    return code.mayReplace(`${why}, and the script below has your edits.`);
  }

  // A fresh model from the controls. Your own text chosen and none given yet makes none, and the
  // model before goes (the worker answers with no session): as a link to the view opens it, with
  // nothing that speaks of another text's model as if it were this one's.
  function configure() {
    if (!started) return;
    if (waitsForText()) {
      setBusy(true);
      setStatus(PASTE_TEXT);
      if (info || preparing) post({ type: 'lm-drop' });
      return;
    }
    prepare('Making a fresh model…');
    post({ type: 'lm-configure', settings: modelSettings() });
  }

  // Your own text is chosen and none given yet.
  const waitsForText = () => settings.corpus === 'custom' && !$('lm-own').dataset.used && ownPrompt === null;

  // A new model is asked for: until it is tested and has written a sample, Train, Generate and
  // Download would wait behind that (minutes, for a large model on a software GPU), so they are off.
  function prepare(status) {
    preparing = true;
    setBusy(true);
    setStatus(status);
  }

  // Without a model there is nothing to press. What asks for another model stays on while one is
  // prepared: its test gives way to the newer model.
  function setBusy(busy) {
    showBusy('lm', ['lm-train', 'lm-reset', 'lm-download', 'lm-upload', 'lm-generate', 'lm-run-code'], busy || !info,
             training, preparing, ['lm-train', 'lm-generate', 'lm-download']);
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
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(file.data);
    } catch {
      setStatus(`${file.name} is not UTF-8 text`, 'error');
      return;
    }
    if (!text.trim()) {
      setStatus(`${file.name} holds no text`, 'error');
      return;
    }
    $('lm-text').value = text;
    showUseText();
    useText();
  }

  // Use this text wants some: a box empty or of spaces alone leaves it off, saying why.
  function showUseText() {
    const empty = !$('lm-text').value.trim();
    $('lm-use-text').disabled = !started || empty;   // before start the worker cannot take it: it stays in the box
    $('lm-use-text').title = empty ? 'Paste a text or choose a file first' : '';
  }

  // The text's model replaces the current one; a text that makes none (too short) changes nothing.
  function useText() {
    const text = $('lm-text').value;
    if (text.length > MAX_TEXT) {
      setStatus(`That text has ${text.length.toLocaleString('en')} characters: at most ${MAX_TEXT.toLocaleString('en')} fit here`, 'error');
      return;
    }
    // A new text, a new prompt to continue and to show the attention over: the text's start.
    ownPrompt = text.trimStart().split('\n')[0].slice(0, 12);
    post({ type: 'lm-text', text });
    configure();
  }

  // The model from the user's text is made: the text and its prompt are the page's now.
  function adoptOwnText() {
    $('lm-own').dataset.used = 'yes';
    settings.prompt = ownPrompt;
    $('lm-prompt').value = settings.prompt;
    history.replaceState(null, '', lmToHash(settings));
    ownPrompt = null;
  }

  // ---- samples and the prompt

  // A software GPU writes a shorter sample: each character is a forward pass of the model.
  function samplingMessage() {
    return { prompt: ownPrompt ?? settings.prompt, length: isSoftware ? 100 : 300, temperature: settings.temperature,
             topK: Number(settings.topk), every: Number(settings.every) };
  }

  // A model being prepared writes a sample with the latest settings anyway.
  function sample() {
    if (started && info && promptOk() && !preparing) post({ type: 'lm-sample' });
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

  // ---- training readouts

  function fresh(steps) {
    curves = [[], [], [], []];
    chart.setData(curves);
    for (const id of ['lm-train-loss', 'lm-val-loss', 'lm-speed']) $(id).textContent = '–';
    evaluatedAt = null;
    showProgress(steps);
    timePanel.fresh();
  }

  function showProgress(steps) {
    showRunProgress('lm', steps, { training, plan, runLength }, Number(settings.steps));
    showAge('lm-val-loss', evaluatedAt, steps, 'measured every few seconds');
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
      axes: [stepAxis('training step', 40), lossAxis('loss (nats per character)', 48)],
      legend: { live: false },
      cursor: { show: false },
      series: [{}, line('training loss', '#f59322'), line('validation loss', '#0b3d63', { points: { show: true, size: 5 } }),
               line('baseline: letter frequencies', '#98a2b3', { width: 1.5, dash: [6, 4] })],
    }, curves, box);
    new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: 210 })).observe(box);
  }

  function showSession(next, why) {
    info = next;
    if (ownPrompt !== null && why === 'configure') adoptOwnText();
    if (why !== 'configure') {   // a script or a file chose the model: say which size it is
      const size = Object.keys(SIZES).find((name) => sizeLabel(SIZES[name]) === sizeLabel(info.config));
      loaded = size ? null : { ...info.config, from: why === 'run' ? 'your script' : 'the file' };
      if (size) settings.size = size;
      showSizes();
      history.replaceState(null, '', lmToHash(settings));
    }
    if (why !== 'run') code.show(info.script);
    const n = (v) => v.toLocaleString('en');
    $('lm-about').textContent = `${n(info.characters)} characters, ${info.vocab.length} different ones: the model learns `
      + `from the first ${n(info.train)} and is tested on the last ${n(info.val)}. The model: ${sizeLabel(info.config)} `
      + `(the characters it reads at once); ${n(info.params)} parameters.`;
    $('lm-baseline').textContent = info.baseline.toFixed(3);
    fresh(info.steps);
    promptOk();
    setBusy(false);
  }

  // No model (the worker let the last one go: see configure()).
  function showNoModel() {
    info = null;
    preparing = false;
    code.show('');
    $('lm-about').textContent = '';
    $('lm-baseline').textContent = '–';
    $('lm-sample').replaceChildren();
    $('lm-sample-note').textContent = '';
    attention.clear();
    fresh(0);
    setBusy(true);
    setStatus(PASTE_TEXT);
  }

  // ---- weights

  async function loadWeights() {
    const file = await takeFile($('lm-upload'));
    if (!file || !(await mayReplaceCode(`You loaded ${file.name}`))) return;
    prepare(`Loading ${file.name}…`);
    post({ type: 'lm-load', data: file.data, name: file.name }, [file.data.buffer]);
  }

  // ---- the code panel

  function runCode() {
    if (!started) return;
    $('lm-output').replaceChildren();
    code.markError(null);
    prepare('Running your script…');
    post({ type: 'lm-run', source: code.text });
  }

  // ---- messages from the worker

  const handlers = {
    'lm-status': ({ text }) => setStatus(text),
    'lm-session': ({ info: next, why }) => (next ? showSession(next, why) : showNoModel()),
    'lm-ready'({ text }) {   // the new model is tested and has written a sample
      preparing = false;
      setBusy(false);
      setStatus(text);
    },
    'lm-state'(state) {
      if (state.training && state.plan !== plan) runLength = state.plan - (curves[0].at(-1) ?? 0);   // a new run
      const status = trainingStatus(training, state, curves[0].at(-1), settings.steps);
      ({ training, plan } = state);
      setBusy(false);
      if (status) setStatus(status);
    },
    'lm-progress'({ data: [steps, loss], stepMs }) {
      $('lm-train-loss').textContent = loss.toFixed(3);
      if (stepMs) $('lm-speed').textContent = (1000 / stepMs).toFixed(1);   // none from profiled steps
      showProgress(steps);
      addPoint(steps, loss, null);
    },
    'lm-eval'({ data: [steps, loss] }) {
      evaluatedAt = steps;
      showProgress(Number($('lm-step-count').textContent));
      $('lm-val-loss').textContent = loss.toFixed(4);
      addPoint(steps, null, loss);
    },
    'lm-sample': ({ sample: s }) => showSample(s),
    'lm-attention': ({ maps }) => attention.show(maps),
    'lm-profile': (message) => timePanel.show(message),
    'lm-weights'({ data }) {
      const name = `webgrad-gpt-${settings.corpus}.pt`;
      saveFile(data, name);
      setStatus(`Saved ${name} (${(data.byteLength / 1e6).toFixed(2)} MB)`);
    },
    'lm-ran'({ error }) {   // a script that ran: the worker said so in the status
      if (error) preparing = false;   // the model before stays
      setBusy(false);
      if (!error) return;
      printTo($('lm-output'), error, 'error');
      code.markError(error);
      setStatus('Your script raised an error (see below)', 'error');
    },
    'lm-testing'({ done, total }) {   // an evaluation's progress, unless a training run's status is shown
      const batches = total ? `${done} of ${total} batches` : `${done} batches`;
      if (!training) setStatus(`Testing the model on the validation text: ${batches}…`);
      else if ($('lm-pause').disabled) setStatus(`Pausing: the model is tested (${batches}) and writes a sample first…`);
    },
    'lm-error'({ text }) {
      ownPrompt = null;   // a text of the user's that made no model leaves the prompt as it was
      preparing = false;
      setBusy(!started);  // without a worker (no WebGPU) there is nothing to press
      setStatus(text.replace(REFUSED, ''), 'error');
    },
    // After Stop; restarted: the worker was replaced, and start() makes a model again once it is ready.
    'lm-stopped'({ model, restarted, where }) {
      training = false;
      preparing = false;
      if (restarted) {
        started = false;
        delete $('lm-own').dataset.used;   // the fresh worker has not got the user's text
        ownPrompt = null;
        showUseText();
      }
      setBusy(restarted || !model);
      $('lm-reset').disabled = restarted;
      const what = where ? `Stopped: Python was interrupted ${where}; ` : 'Stopped: ';
      setStatus(restarted ? 'Stopped: Python was restarted, and a fresh model comes once it is ready'
        : what + (model ? 'press Train to go on' : waitsForText() ? PASTE_TEXT.toLowerCase()
          : 'the model is not ready: press Reset to make one'));
    },
  };

  makeChart();
  showProgress(0);

  return {
    handlers,
    corrections,
    adapter(software) {  // before start: the default size suits the adapter
      isSoftware = software;
      settings.size ??= software ? 'tiny' : 'medium';
      settings.step ??= stepFor(software);
      $('lm-step').value = settings.step;
      showSizes();
    },
    start() {  // the worker is ready: the first configure loads the text
      if (started) return;
      started = true;
      timePanel.ready();
      showUseText();
      configure();
    },
    pause: () => training && post({ type: 'lm-pause' }),
    hash: () => lmToHash(settings),
  };
}
