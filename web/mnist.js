// The MNIST view: train an MLP or a CNN on handwritten digits, watch loss and accuracy, see which
// test digits it gets wrong, draw a digit for it, and download or load its weights. Python and
// the GPU run in worker.js (web/mnist_view.py); this is the page side, and mnist_draw.js its drawing pad.
import uPlot from './uplot/uPlot.esm.js';
import { oneOfEach, settingsFromHash, wholeNumber } from './link_settings.js';
import { STEP_CHOICES, STEP_HINT, STEP_LABELS, stepFor } from './step_settings.js';
import { digitImage, drawingPad } from './mnist_draw.js';
import { askInDialog } from './editor.js';
import { timeChart } from './time_chart.js';
import { $, enteredSeed, isNewRun, lossAxis, saveFile, showAge, showBusy, showRunProgress, showStatus, stepAxis,
         takeFile, trainingStatus } from './ui.js';

export const MNIST_CHOICES = {
  model: ['mlp', 'cnn'],
  lr: ['0.0003', '0.001', '0.003', '0.01'],
  batch: ['32', '64', '128', '256'],
  steps: ['100', '150', '300', '500', '1000', '2000', '5000'],
  test: ['1000', '10000'],
  step: STEP_CHOICES,
};
// test and step: null until the adapter is known (a software GPU tests on the first 1000 digits, to
// answer in seconds, and runs its steps eagerly: see stepFor).
const DEFAULTS = { model: 'mlp', lr: '0.003', batch: '64', steps: '1000', test: null, step: null, seed: 1 };
const LABELS = { model: { mlp: 'MLP (784-128-10)', cnn: 'CNN (2 conv layers)' },
                 test: { 1000: 'first 1000', 10000: 'all 10,000' }, step: STEP_LABELS };
const SEED = wholeNumber(0, 99999);
const TRAIN_SIZE = 60000;
const SHOWN_DIGITS = 60;
// What shows a model's test results (and its guess of the drawing) besides the accuracy: dimmed once
// a new model replaces it.
const RESULT_VIEWS = ['mnist-accuracy-of', 'mnist-chart', 'mnist-confusion', 'mnist-digits', 'prediction', 'probabilities'];

// Settings from a URL hash such as "#view=mnist&model=cnn&steps=500"; bad values fall back to defaults,
// each one pushed to corrections as {key, value, allowed, using} (allowed null: no such setting).
export function mnistFromHash(hash, corrections = []) {
  return settingsFromHash(hash, DEFAULTS, { ...oneOfEach(MNIST_CHOICES), seed: SEED }, corrections);
}

export function mnistToHash(settings) {
  return '#view=mnist&' + Object.keys(DEFAULTS).filter((k) => settings[k] !== null).map((k) => `${k}=${settings[k]}`).join('&');
}

// The view; post sends a message to the worker. Returns {handlers (for the worker's mnist-*
// messages), adapter(isSoftware) (once the worker knows it), start() (once the worker is ready),
// pause(), hash(), corrections (what mnistFromHash corrected in initialHash)}.
export function mnistView(post, initialHash) {
  const corrections = [];
  const settings = mnistFromHash(initialHash, corrections);
  let isSoftware = false;
  let started = false;
  let training = false;
  let preparing = false;        // a model asked for (the controls', a weights file's) is on its way: made and tested
  let resultsStale = false;     // the test results shown are a replaced model's: the new one is not tested yet
  let busyAtStop = false;       // this tab had work under way when a Stop was last pressed
  let plan = 0;                 // the step count the current Train run stops at
  let runLength = 0;            // that run's length in steps (Train for when it started)
  let test = null;              // {images: Uint8Array (N*784), labels: Uint8Array (N)}
  let predictions = null;       // Int32Array: the model's digit for each evaluated test image
  let evaluatedAt = null;       // the step count the predictions (and the test accuracy) are from
  let loadedFrom = null;        // the weights file the model at step 0 came from, if any
  let curves = [[], [], [], []];  // steps, training loss, training accuracy, test accuracy
  let chart = null;
  let showMistakes = false;
  let upload = '';              // the name of the weights file being loaded

  // ---- controls

  showChoices();
  $('mnist-step').title = STEP_HINT;
  for (const key of Object.keys(DEFAULTS)) {
    $(`mnist-${key}`).value = settings[key];
    $(`mnist-${key}`).addEventListener('change', () => changed(key));
  }
  $('mnist-train').onclick = () => post({ type: 'mnist-train', steps: Number(settings.steps),
                                          newRun: isNewRun(Number(settings.steps), runLength) });
  $('mnist-pause').onclick = () => post({ type: 'mnist-pause' });
  $('mnist-reset').onclick = configure;
  $('mnist-download').onclick = () => post({ type: 'mnist-save' });
  $('mnist-upload').onchange = loadWeights;
  for (const radio of document.querySelectorAll('input[name=digits]')) {
    radio.onchange = () => { showMistakes = radio.value === 'wrong' && radio.checked; drawDigits(); };
  }
  // Stop (any tab's: ui.js) ends whatever Python runs; this tab's status speaks of it only if this
  // tab had work under way then (a run's end reaches the page before the Stop's answer does).
  for (const button of document.querySelectorAll('button.stop')) {
    button.addEventListener('click', () => { busyAtStop = training || preparing; });
  }
  setBusy(true);
  const pad = drawingPad(post, () => started);
  const timePanel = timeChart('mnist-', post, 'Train', () => training);

  // The options, named in words; on a software GPU the CNN says it is slow.
  function showChoices() {
    for (const [key, options] of Object.entries(MNIST_CHOICES)) {
      const label = (o) => (key === 'model' && o === 'cnn' && isSoftware ? `${LABELS.model.cnn}: slow here` : LABELS[key]?.[o] ?? o);
      $(`mnist-${key}`).replaceChildren(...options.map((o) => new Option(label(o), o)));
      $(`mnist-${key}`).value = settings[key];
    }
    showAdapterNote();
  }

  // On a software GPU the page says so, and warns before the CNN's slow steps.
  function showAdapterNote() {
    const note = $('mnist-adapter-note');
    note.hidden = !isSoftware;
    note.textContent = 'This browser offers only a software GPU (it computes on the CPU), so Test digits starts at '
      + 'the first 1,000, to answer in seconds.' + (settings.model === 'cnn'
      ? ' The CNN is slower here, a few steps a second; the MLP learns far faster.' : '');
    note.classList.toggle('warn', settings.model === 'cnn');
  }

  // Every setting but Train for makes a fresh model: during a run, only once the user agrees.
  async function changed(key) {
    const input = $(`mnist-${key}`);
    const value = key === 'seed' ? enteredSeed(input, SEED, settings.seed, 'mnist-status') : input.value;
    if (value === undefined) return;
    if (key !== 'steps' && training && !(await mayDiscardRun(input.closest('.field').querySelector('.label').textContent))) {
      input.value = settings[key];
      return;
    }
    settings[key] = value;
    history.replaceState(null, '', mnistToHash(settings));
    if (key === 'model') showAdapterNote();
    if (key !== 'steps') configure();
    else if (!training) {
      const steps = shownSteps();
      showProgress(steps);
      // a finished run's status names the steps the next Train runs
      if (plan > 0 && steps >= plan) setStatus(trainingStatus(true, { training, plan }, steps, settings.steps));
    }
  }

  // Asks in the page's dialog whether a run under way may be thrown away for a fresh model (setting:
  // the changed setting's label); resolves true for Start afresh, false for Keep training (or Escape).
  function mayDiscardRun(setting) {
    return askInDialog('mnist-discard', `You changed “${setting}” while the model trains.`, 'mnist-discard-yes',
                       'mnist-discard-no');
  }

  function configure() {
    if (!started) return;
    loadedFrom = null;
    prepare('Making a fresh model…');
    post({ type: 'mnist-configure', settings });
  }

  // A new model is asked for: until it is tested, Train and Download would wait behind that (half a
  // minute, for the CNN on 10,000 digits on a software GPU), so they are off.
  function prepare(status) {
    preparing = true;
    setBusy(true);
    setStatus(status);
    markResultsStale(true);
  }

  // The results on screen stay while a new model is made and tested, but they are the previous
  // model's: dimmed until the new one's test (stale false), and the accuracy says whose they are.
  function markResultsStale(stale) {
    resultsStale = stale && predictions !== null;   // none shown yet: nothing to mark
    showResultsAge(shownSteps());
  }

  function setBusy(busy) {
    showBusy('mnist', ['mnist-train', 'mnist-reset', 'mnist-download', 'mnist-upload'], busy, training, preparing,
             ['mnist-train', 'mnist-download']);
  }

  function setStatus(text, kind) {
    showStatus('mnist-status', text, kind);
  }

  // ---- training readouts

  function fresh() {
    curves = [[], [], [], []];
    evaluatedAt = null;
    chart.setData(curves);
    for (const id of ['mnist-loss', 'mnist-train-accuracy', 'mnist-speed']) $(id).textContent = '–';
    showProgress(0);
    timePanel.fresh();
  }

  const shownSteps = () => curves[0].at(-1) ?? 0;

  function showProgress(steps) {
    showRunProgress('mnist', steps, { training, plan, runLength }, Number(settings.steps));
    $('mnist-epoch').textContent = ((steps * Number(settings.batch)) / TRAIN_SIZE).toFixed(2);
    showResultsAge(steps);
  }

  // Whose and how old the test results are: the step the accuracy is from, behind the step count
  // while no run goes on when Stop (or an error) ended the run before its test; or, dimmed, that they
  // are a replaced model's.
  function showResultsAge(steps) {
    showAge('mnist-accuracy', evaluatedAt, steps,
            training ? 'tested every few seconds' : `not tested since; the model is at step ${steps}`);
    if (resultsStale) {
      $('mnist-accuracy').classList.add('stale');   // after showAge, which greys it for its age alone
      $('mnist-accuracy-at').textContent = `previous model: ${preparing ? 'testing the new one…' : 'the new one is untested'}`;
    } else if (evaluatedAt === 0) {
      $('mnist-accuracy-at').textContent = `at step 0, ${loadedFrom ? `with the weights of ${loadedFrom}` : 'before training'}`;
    }
    for (const id of RESULT_VIEWS) $(id).classList.toggle('stale', resultsStale);
  }

  function addPoint(step, loss, trainAccuracy, testAccuracy) {
    if (curves[0].at(-1) === step) {
      if (testAccuracy !== null) curves[3][curves[3].length - 1] = testAccuracy;
    } else {
      [step, loss, trainAccuracy, testAccuracy].forEach((v, i) => curves[i].push(v));
    }
    chart.setData(curves);
  }

  function makeChart() {
    const box = $('mnist-chart');
    const line = (label, stroke, scale, extra = {}) => ({ label, stroke, scale, width: 2, spanGaps: true, points: { show: false }, ...extra });
    chart = new uPlot({
      width: box.clientWidth || 400, height: 190,
      scales: { x: { time: false }, loss: { range: (u, min, max) => [0, Math.max(max ?? 1, 0.1)] }, acc: { range: [0, 1] } },
      axes: [stepAxis('training step', 34), { scale: 'loss', ...lossAxis('loss', 40), labelSize: 20 },
             { scale: 'acc', label: 'accuracy', side: 1, size: 44, labelSize: 20, grid: { show: false },
               values: (u, ticks) => ticks.map((t) => `${Math.round(t * 100)}%`) }],
      legend: { live: false },
      cursor: { show: false },
      // test accuracy as dots where it was measured: a line across the steps between two tests would
      // draw a rise that nobody measured
      series: [{}, line('training loss (left axis)', '#f59322', 'loss'), line('training accuracy (right)', '#9cc5e4', 'acc'),
               line('test accuracy (right)', '#0b3d63', 'acc', { spanGaps: false, points: { show: true, size: 5 } })],
    }, curves, box);
    new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: 190 })).observe(box);
  }

  // ---- test digits and the confusion matrix

  function showEvaluation(steps) {
    const n = predictions.length;
    const confusion = Array.from({ length: 10 }, () => new Array(10).fill(0));
    let right = 0;
    for (let i = 0; i < n; i++) {
      confusion[test.labels[i]][predictions[i]]++;
      if (test.labels[i] === predictions[i]) right++;
    }
    const accuracy = right / n;
    evaluatedAt = steps;
    $('mnist-accuracy').textContent = accuracy.toFixed(3);
    $('mnist-accuracy-of').textContent = `${right} of ${n} test digits right`;
    showResultsAge(shownSteps());
    addPoint(steps, null, null, accuracy);
    drawConfusion(confusion);
    drawDigits();
  }

  function drawConfusion(confusion) {
    const table = $('mnist-confusion');
    const head = `<tr><th></th>${confusion.map((_, j) => `<th scope="col">${j}</th>`).join('')}</tr>`;
    table.innerHTML = head + confusion.map((row, i) => `<tr><th scope="row">${i}</th>${row.map((count, j) => `<td>${count || ''}</td>`).join('')}</tr>`).join('');
    // Shade by the share of the true digit's images: blue on the diagonal, orange off it.
    confusion.forEach((row, i) => {
      const total = row.reduce((a, b) => a + b, 0) || 1;
      row.forEach((count, j) => {
        const cell = table.rows[i + 1].cells[j + 1];
        const share = count / total;
        const strength = i === j ? share : Math.min(1, 4 * share);
        cell.style.background = i === j ? `rgba(8, 119, 189, ${strength.toFixed(3)})` : `rgba(245, 147, 34, ${strength.toFixed(3)})`;
        if (i === j && share > 0.6) cell.classList.add('light');
        cell.title = `true ${i}, predicted ${j}: ${count}`;
      });
    });
  }

  function drawDigits() {
    if (!test || !predictions) return;
    const picked = [];
    for (let i = 0; i < predictions.length && picked.length < SHOWN_DIGITS; i++) {
      if (!showMistakes || predictions[i] !== test.labels[i]) picked.push(i);
    }
    const cells = picked.map((i) => {
      const wrong = predictions[i] !== test.labels[i];
      const figure = document.createElement('figure');
      figure.className = wrong ? 'digit wrong' : 'digit';
      figure.title = `test image ${i}: true ${test.labels[i]}, predicted ${predictions[i]}`;
      figure.append(digitCanvas(test.images.subarray(784 * i, 784 * (i + 1))));
      const caption = document.createElement('figcaption');
      caption.textContent = wrong ? `${test.labels[i]}→${predictions[i]}` : String(predictions[i]);
      figure.append(caption);
      return figure;
    });
    $('mnist-digits').replaceChildren(...cells);
    $('mnist-digits-empty').hidden = cells.length > 0;
  }

  // ---- weights

  function saveWeights({ data, model }) {
    const name = `webgrad-mnist-${model}.safetensors`;
    saveFile(data, name);
    setStatus(`Saved ${name} (${(data.byteLength / 1e6).toFixed(1)} MB)`);
  }

  async function loadWeights() {
    const file = await takeFile($('mnist-upload'));
    if (!file) return;
    upload = file.name;
    prepare(`Loading ${file.name}…`);
    post({ type: 'mnist-load', data: file.data, name: file.name }, [file.data.buffer]);
  }

  // ---- messages from the worker

  const handlers = {
    'mnist-status': ({ text }) => setStatus(text),
    'mnist-data'({ images, labels }) {
      test = { images, labels };
    },
    'mnist-state'(state) {
      if (state.training && state.plan !== plan) runLength = state.plan - shownSteps();   // a new run
      const status = trainingStatus(training, state, shownSteps(), settings.steps);
      // A fresh model's plan is 0; the end of a run that it replaced says so again, after its first test.
      const freshModel = state.plan === 0 && plan !== 0;
      ({ training, plan } = state);
      setBusy(false);
      if (status && !preparing) setStatus(status);   // a model being prepared: the worker says how far it is
      if (freshModel) fresh();
      else showProgress(shownSteps());
    },
    'mnist-progress'({ data: [steps, loss, accuracy], stepMs }) {
      $('mnist-loss').textContent = loss.toFixed(3);
      $('mnist-train-accuracy').textContent = accuracy.toFixed(3);
      if (stepMs) $('mnist-speed').textContent = (1000 / stepMs).toFixed(1);   // none from profiled steps
      showProgress(steps);
      addPoint(steps, loss, accuracy, null);
    },
    'mnist-eval'({ steps, predictions: p }) {
      predictions = p;
      // while a new model is prepared, the test may be of one it replaces; else it is of the current one
      if (!preparing) markResultsStale(false);
      showEvaluation(steps);
      pad.predict();  // the drawing's guess follows the model as it learns
    },
    'mnist-probs': ({ data }) => pad.answered(Array.from(data)),
    'mnist-profile': (message) => timePanel.show(message),
    'mnist-weights': saveWeights,
    'mnist-loaded'({ model }) {
      settings.model = model;
      loadedFrom = upload;
      $('mnist-model').value = model;
      history.replaceState(null, '', mnistToHash(settings));
    },
    'mnist-ready'() {   // the new model is tested
      preparing = false;
      markResultsStale(false);
      setBusy(false);
      setStatus(loadedFrom ? `Loaded the ${LABELS.model[settings.model]} weights of ${loadedFrom}: Train goes on from them`
        : 'Ready: press Train');
    },
    'mnist-error'({ text }) {   // a new model that failed leaves the one before
      pad.dropped();
      if (preparing) markResultsStale(false);
      preparing = false;
      setBusy(!started);  // without a worker (no WebGPU) there is nothing to press
      setStatus(text, 'error');
    },
    // After Stop; restarted: the worker was replaced, and start() makes a model again once it is ready.
    // A Stop of another tab's Python, with nothing of this tab's under way (or this tab not yet
    // opened), leaves this tab as it was.
    'mnist-stopped'({ model, restarted }) {
      pad.dropped();
      if (!started || !(busyAtStop || restarted)) return;
      training = false;
      preparing = false;
      if (restarted) started = false;
      // a Stop during a new model's test leaves it untested; a restart leaves no model at all
      markResultsStale(resultsStale || restarted);
      setBusy(restarted || !model);
      $('mnist-reset').disabled = restarted;
      setStatus(restarted ? 'Stopped: Python was restarted, and a fresh model comes once it is ready'
        : model ? 'Stopped: press Train to go on' : 'Stopped before the model was ready: press Reset to make one');
    },
  };

  makeChart();
  showProgress(0);

  return {
    handlers,
    corrections,
    adapter(software) {  // before start: the test size and the CNN's note suit the adapter
      isSoftware = software;
      settings.test ??= software ? '1000' : '10000';
      settings.step ??= stepFor(software);
      showChoices();
    },
    start() {  // the worker is ready: the first configure loads the data
      if (started) return;
      started = true;
      timePanel.ready();
      configure();
    },
    pause: () => training && post({ type: 'mnist-pause' }),
    hash: () => mnistToHash(settings),
  };
}

// A 28x28 digit (0 = paper, 255 = ink) as a small canvas.
function digitCanvas(pixels) {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 28;
  canvas.getContext('2d').putImageData(digitImage(pixels), 0, 0);
  return canvas;
}
