// The MNIST view: train an MLP or a CNN on handwritten digits, watch loss and accuracy, see which
// test digits it gets wrong, draw a digit for it, and download or load its weights. Python and
// the GPU run in worker.js (web/mnist_view.py); this is the page side.
import uPlot from './uplot/uPlot.esm.js';
import { $, saveFile, showBusy, showStatus, takeFile } from './ui.js';

export const MNIST_CHOICES = {
  model: ['mlp', 'cnn'],
  lr: ['0.0003', '0.001', '0.003', '0.01'],
  batch: ['32', '64', '128', '256'],
  steps: ['100', '150', '300', '500', '1000', '2000', '5000'],
  test: ['1000', '10000'],
};
const DEFAULTS = { model: 'mlp', lr: '0.003', batch: '64', steps: '1000', test: '10000', seed: 1 };
const LABELS = { mlp: 'MLP (784-128-10)', cnn: 'CNN (2 conv layers)', 1000: 'first 1000', 10000: 'all 10000' };
const TRAIN_SIZE = 60000;
const SHOWN_DIGITS = 60;
const INK = [17, 24, 39];

// Settings from a URL hash such as "#view=mnist&model=cnn&steps=500"; bad values fall back to defaults.
export function mnistFromHash(hash) {
  const settings = { ...DEFAULTS };
  for (const [key, value] of new URLSearchParams(hash.replace(/^#/, ''))) {
    if (MNIST_CHOICES[key]?.includes(value)) settings[key] = value;
    else if (key === 'seed' && /^\d{1,5}$/.test(value)) settings.seed = Number(value);
  }
  return settings;
}

export function mnistToHash(settings) {
  return '#view=mnist&' + Object.keys(DEFAULTS).map((k) => `${k}=${settings[k]}`).join('&');
}

// The view; post sends a message to the worker. Returns {handlers (for the worker's mnist-*
// messages), start() (once the worker is ready), pause(), hash()}.
export function mnistView(post, initialHash) {
  const settings = mnistFromHash(initialHash);
  let started = false;
  let training = false;
  let plan = 0;                 // the step count the current Train run stops at
  let test = null;              // {images: Uint8Array (N*784), labels: Uint8Array (N)}
  let predictions = null;       // Int32Array: the model's digit for each evaluated test image
  let curves = [[], [], [], []];  // steps, training loss, training accuracy, test accuracy
  let chart = null;
  let showMistakes = false;
  let predicting = false;       // a prediction of the drawing is in flight
  let drawingChanged = false;   // the drawing changed since the prediction in flight was asked for
  let upload = '';              // the name of the weights file being loaded

  // ---- controls

  for (const [key, options] of Object.entries(MNIST_CHOICES)) {
    $(`mnist-${key}`).replaceChildren(...options.map((o) => new Option(LABELS[o] ?? o, o)));
  }
  for (const key of Object.keys(DEFAULTS)) {
    $(`mnist-${key}`).value = settings[key];
    $(`mnist-${key}`).addEventListener('change', () => changed(key));
  }
  $('mnist-train').onclick = () => post({ type: 'mnist-train' });
  $('mnist-pause').onclick = () => post({ type: 'mnist-pause' });
  $('mnist-reset').onclick = configure;
  $('mnist-download').onclick = () => post({ type: 'mnist-save' });
  $('mnist-upload').onchange = loadWeights;
  for (const radio of document.querySelectorAll('input[name=digits]')) {
    radio.onchange = () => { showMistakes = radio.value === 'wrong' && radio.checked; drawDigits(); };
  }
  setBusy(true);

  function changed(key) {
    const value = $(`mnist-${key}`).value;
    if (key === 'seed' && !/^\d{1,5}$/.test(value)) return;
    settings[key] = key === 'seed' ? Number(value) : value;
    history.replaceState(null, '', mnistToHash(settings));
    if (key === 'steps' && !training) showProgress(curves[0].at(-1) ?? 0);
    else if (key !== 'steps') configure();
  }

  function configure() {
    if (!started) return;
    setBusy(true);
    post({ type: 'mnist-configure', settings });
  }

  function setBusy(busy) {
    showBusy('mnist', ['mnist-train', 'mnist-reset', 'mnist-download', 'mnist-upload'], busy, training);
  }

  function setStatus(text, kind) {
    showStatus('mnist-status', text, kind);
  }

  // ---- training readouts

  function fresh() {
    curves = [[], [], [], []];
    chart.setData(curves);
    for (const id of ['mnist-loss', 'mnist-train-accuracy', 'mnist-speed']) $(id).textContent = '–';
    showProgress(0);
  }

  function showProgress(steps) {
    const runLength = Number(settings.steps);
    const start = plan > 0 ? plan - runLength : 0;
    $('mnist-progress').max = runLength;
    $('mnist-progress').value = Math.min(runLength, Math.max(0, steps - start));
    $('mnist-step-count').textContent = String(steps);
    $('mnist-epoch').textContent = ((steps * Number(settings.batch)) / TRAIN_SIZE).toFixed(2);
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
      axes: [{ label: 'step', size: 34 }, { scale: 'loss', size: 44 },
             { scale: 'acc', side: 1, size: 48, grid: { show: false }, values: (u, ticks) => ticks.map((t) => `${Math.round(t * 100)}%`) }],
      legend: { live: false },
      cursor: { show: false },
      series: [{}, line('training loss', '#f59322', 'loss'), line('training accuracy', '#9cc5e4', 'acc'),
               line('test accuracy', '#0b3d63', 'acc', { points: { show: true, size: 5 } })],
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
    $('mnist-accuracy').textContent = accuracy.toFixed(3);
    $('mnist-accuracy-of').textContent = `${right} of ${n} test digits right`;
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

  // ---- drawing a digit

  const pad = $('draw');
  const pen = pad.getContext('2d', { willReadFrequently: true });
  let drawing = false;
  let last = null;

  const at = (e) => {
    const box = pad.getBoundingClientRect();
    return [((e.clientX - box.left) * pad.width) / box.width, ((e.clientY - box.top) * pad.height) / box.height];
  };
  pad.addEventListener('pointerdown', (e) => {
    drawing = true;
    pad.setPointerCapture(e.pointerId);
    last = at(e);
    stroke(last, last);
  });
  pad.addEventListener('pointermove', (e) => {
    if (!drawing) return;
    const next = at(e);
    stroke(last, next);
    last = next;
  });
  const stop = () => { drawing = false; };
  pad.addEventListener('pointerup', stop);
  pad.addEventListener('pointercancel', stop);
  $('draw-clear').onclick = () => {
    pen.clearRect(0, 0, pad.width, pad.height);
    $('pad').classList.remove('inked');
    $('seen').getContext('2d').clearRect(0, 0, 28, 28);
    showProbabilities(null);
  };

  function stroke(from, to) {
    $('pad').classList.add('inked');
    pen.lineWidth = pad.width / 14;  // about MNIST's stroke once the digit is scaled to 20 pixels
    pen.lineCap = pen.lineJoin = 'round';
    pen.strokeStyle = `rgb(${INK})`;
    pen.beginPath();
    pen.moveTo(...from);
    pen.lineTo(...to);
    pen.stroke();
    predict();
  }

  // Asks the worker for the drawing's probabilities; while one request is out, the latest
  // drawing waits for its answer, so a fast hand never queues up stale work.
  function predict() {
    const pixels = mnistPixels();
    if (!started || !pixels) return;
    if (predicting) {
      drawingChanged = true;
      return;
    }
    predicting = true;
    drawingChanged = false;
    drawSeen(pixels);
    post({ type: 'mnist-predict', pixels }, [pixels.buffer]);
  }

  // The drawing as MNIST prepared its digits: the ink's bounding box scaled to fit 20x20 pixels,
  // placed in a 28x28 image so that its centre of mass is at the centre; 0 = paper, 255 = ink.
  function mnistPixels() {
    const { width, height } = pad;
    const alpha = pen.getImageData(0, 0, width, height).data;
    let [x0, y0, x1, y1, mass, mx, my] = [width, height, -1, -1, 0, 0, 0];
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const a = alpha[4 * (y * width + x) + 3];
        if (!a) continue;
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
        mass += a; mx += a * x; my += a * y;
      }
    }
    if (mass === 0) return null;
    const scale = 20 / Math.max(x1 - x0 + 1, y1 - y0 + 1);
    const small = new OffscreenCanvas(28, 28);
    const ctx = small.getContext('2d', { willReadFrequently: true });
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(pad, x0, y0, x1 - x0 + 1, y1 - y0 + 1,
                  14 - (mx / mass - x0) * scale, 14 - (my / mass - y0) * scale, (x1 - x0 + 1) * scale, (y1 - y0 + 1) * scale);
    const rgba = ctx.getImageData(0, 0, 28, 28).data;
    return Uint8Array.from({ length: 784 }, (_, i) => rgba[4 * i + 3]);
  }

  function drawSeen(pixels) {
    $('seen').getContext('2d').putImageData(digitImage(pixels), 0, 0);
  }

  function showProbabilities(probs) {
    const best = probs ? probs.indexOf(Math.max(...probs)) : -1;
    $('prediction').textContent = probs ? String(best) : '–';
    const rows = Array.from({ length: 10 }, (_, d) => {
      const row = document.createElement('div');
      row.className = d === best ? 'prob best' : 'prob';
      const p = probs ? probs[d] : 0;
      row.dataset.digit = d;
      row.dataset.p = String(p);
      const fill = document.createElement('span');
      fill.className = 'fill';
      fill.style.width = `${(100 * p).toFixed(1)}%`;
      row.innerHTML = `<b>${d}</b><span class="track"></span><span class="pct">${probs ? (100 * p).toFixed(1) + '%' : ''}</span>`;
      row.querySelector('.track').append(fill);
      return row;
    });
    $('probabilities').replaceChildren(...rows);
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
    setBusy(true);
    setStatus(`Loading ${file.name}…`);
    post({ type: 'mnist-load', data: file.data, name: file.name }, [file.data.buffer]);
  }

  // ---- messages from the worker

  const handlers = {
    'mnist-status': ({ text }) => setStatus(text),
    'mnist-data'({ images, labels }) {
      test = { images, labels };
    },
    'mnist-state'({ training: now, plan: until }) {
      const finished = training && !now;
      training = now;
      plan = until;
      setBusy(false);
      if (now) setStatus('Training…');
      else if (finished) setStatus(curves[0].at(-1) >= plan ? `Trained ${plan} steps: press Train for ${settings.steps} more` : 'Paused');
      else setStatus('Ready: press Train');
      if (!now && plan === 0) fresh();
    },
    'mnist-progress'({ data: [steps, loss, accuracy], stepMs }) {
      $('mnist-loss').textContent = loss.toFixed(3);
      $('mnist-train-accuracy').textContent = accuracy.toFixed(3);
      $('mnist-speed').textContent = (1000 / stepMs).toFixed(1);
      showProgress(steps);
      addPoint(steps, loss, accuracy, null);
    },
    'mnist-eval'({ steps, predictions: p }) {
      predictions = p;
      showEvaluation(steps);
      if (mnistPixels()) predict();  // the drawing's guess follows the model as it learns
    },
    'mnist-probs'({ data }) {
      predicting = false;
      showProbabilities(Array.from(data));
      if (drawingChanged) predict();
    },
    'mnist-weights': saveWeights,
    'mnist-loaded'({ model }) {
      settings.model = model;
      $('mnist-model').value = model;
      history.replaceState(null, '', mnistToHash(settings));
      setStatus(`Loaded the ${LABELS[model]} weights of ${upload}`);
    },
    'mnist-error'({ text }) {
      predicting = false;
      setBusy(!started);  // without a worker (no WebGPU) there is nothing to press
      setStatus(text, 'error');
    },
  };

  makeChart();
  showProbabilities(null);
  showProgress(0);

  return {
    handlers,
    start() {  // the worker is ready: the first configure loads the data
      if (started) return;
      started = true;
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

function digitImage(pixels) {
  const image = new ImageData(28, 28);
  pixels.forEach((v, i) => image.data.set([...INK, v], 4 * i));
  return image;
}
