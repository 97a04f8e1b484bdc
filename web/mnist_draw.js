// The MNIST view's drawing pad: the user draws a digit, the page scales it down as MNIST's digits
// were, and shows the model's probabilities for it. mnist.js owns the model and the worker.
import { $ } from './ui.js';

const INK = [17, 24, 39];

// A 28x28 digit (0 = paper, 255 = ink) as ImageData in the page's ink colour.
export function digitImage(pixels) {
  const image = new ImageData(28, 28);
  pixels.forEach((v, i) => image.data.set([...INK, v], 4 * i));
  return image;
}

// The pad; post sends a message to the worker, and ready() says whether the worker can take one.
// Returns {predict() (asks again for the drawing, if any), answered(probs) (the worker's answer),
// dropped() (the request in flight will get no answer)}.
export function drawingPad(post, ready) {
  const pad = $('draw');
  const pen = pad.getContext('2d', { willReadFrequently: true });
  let drawing = false;
  let last = null;
  let predicting = false;       // a prediction of the drawing is in flight
  let drawingChanged = false;   // the drawing changed since the prediction in flight was asked for

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
    if (!ready() || !pixels) return;
    if (predicting) {
      drawingChanged = true;
      return;
    }
    predicting = true;
    drawingChanged = false;
    $('seen').getContext('2d').putImageData(digitImage(pixels), 0, 0);
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

  function showProbabilities(probs) {
    const best = probs ? probs.indexOf(Math.max(...probs)) : -1;
    $('prediction').textContent = probs ? String(best) : 'draw a digit';
    $('prediction').classList.toggle('hint', !probs);
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

  showProbabilities(null);

  return {
    predict,
    answered(probs) {
      predicting = false;
      showProbabilities(probs);
      if (drawingChanged) predict();
    },
    dropped() {
      predicting = false;
    },
  };
}
