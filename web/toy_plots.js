// The toy view's plots: the output over the plane with the data points, axes and a colour scale;
// the network diagram with a small heatmap per drawn unit and its weights as lines; the loss chart.
// They read the arrays web/playground.py sends ('points' once per model, 'frame' after each chunk
// of steps); their layout is documented there.
import uPlot from './uplot/uPlot.esm.js';
import { lossAxis, stepAxis } from './ui.js';

const ORANGE = [245, 147, 34];   // negative values, class 0
const BLUE = [8, 119, 189];      // positive values, class 1
const GRID = 50;                 // playground.py's GRID

// v in [-1, 1] to a colour: white at 0, towards orange (-1) or blue (+1); strength scales the tint.
function color(v, strength = 1) {
  const t = Math.min(1, Math.abs(v)) * strength;
  return (v >= 0 ? BLUE : ORANGE).map((c) => Math.round(255 + (c - 255) * t));
}
const css = (rgb) => `rgb(${rgb.join(', ')})`;

// The points message: {extent, regression, rows: [[x, y, label or value, isTest]...]}.
export function readPoints(data) {
  const [extent, nTrain, regression] = data;
  const rows = [];
  for (let i = 3, k = 0; i < data.length; i += 3, k++) rows.push([data[i], data[i + 1], data[i + 2], k >= nTrain]);
  return { extent, regression: regression === 1, rows };
}

// A frame message: the readouts, the output on the grid, and (for a chain of Linear layers) the
// diagram's column widths, each drawn column's unit values (k per grid point) and the drawn weights.
export function readFrame(data) {
  const [step, trainLoss, testLoss, score, shown, columns] = data;
  const widths = Array.from(data.subarray(6, 6 + columns));
  const drawn = widths.map((n) => Math.min(n, shown));
  let at = 6 + columns;
  const take = (n) => data.subarray(at, (at += n));
  const output = take(GRID * GRID);
  const maps = drawn.slice(0, -1).map((k) => ({ k, values: take(GRID * GRID * k) }));
  const weights = drawn.slice(1).map((k, i) => take(k * drawn[i]));
  return { step, trainLoss, testLoss, score, widths, drawn, output, maps, weights };
}

// Value at grid point p of unit j of a drawn column's maps.
const unitValue = (map, p, j) => map.values[p * map.k + j];

// ---- the output plot

const MARGIN = { left: 34, right: 8, top: 8, bottom: 30 };

// Draws on canvas: the output (p(class 1), shown as 2p - 1, or the value) as colours under the
// points, with x1 and x2 axes. options: {testData: show the test points, discretize: two colours}.
export function drawOutput(canvas, points, output, options) {
  const ctx = canvas.getContext('2d');
  const size = canvas.width - MARGIN.left - MARGIN.right;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = '#fafafa';
  ctx.fillRect(MARGIN.left, MARGIN.top, size, size);
  const regression = points?.regression ?? false;
  if (output) {
    const image = new ImageData(GRID, GRID);
    output.forEach((o, i) => {
      let v = regression ? o : 2 * o - 1;
      if (options.discretize) v = v >= 0 ? 1 : -1;
      image.data.set([...color(v, 0.6), 255], 4 * i);
    });
    const small = new OffscreenCanvas(GRID, GRID);
    small.getContext('2d').putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = !options.discretize;
    ctx.drawImage(small, MARGIN.left, MARGIN.top, size, size);
  }
  if (!points) return;
  const toPx = (v) => ((v + points.extent) / (2 * points.extent)) * size;
  for (const [x, y, label, isTest] of points.rows) {
    if (isTest && !options.testData) continue;
    ctx.beginPath();
    ctx.arc(MARGIN.left + toPx(x), MARGIN.top + size - toPx(y), 3.5, 0, 2 * Math.PI);
    ctx.fillStyle = css(regression ? color(label) : label === 1 ? BLUE : ORANGE);
    ctx.fill();
    ctx.lineWidth = isTest ? 1.4 : 1;
    ctx.strokeStyle = isTest ? 'rgba(0, 0, 0, 0.8)' : regression ? 'rgba(0, 0, 0, 0.3)' : '#fff';  // values near 0 are white
    ctx.stroke();
  }
  drawAxes(ctx, size, points.extent, toPx);
}

function drawAxes(ctx, size, extent, toPx) {
  const bottom = MARGIN.top + size;
  ctx.strokeStyle = '#98a2b3';
  ctx.fillStyle = '#667085';
  ctx.lineWidth = 1;
  ctx.font = '11px system-ui, sans-serif';
  ctx.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, size - 1, size - 1);
  const step = extent > 1.2 ? 1 : 0.5;
  for (let t = -Math.floor(extent / step) * step; t <= extent + 1e-9; t += step) {
    const px = toPx(t);
    const label = String(Number(t.toFixed(1)));
    ctx.beginPath();
    ctx.moveTo(MARGIN.left + px, bottom);
    ctx.lineTo(MARGIN.left + px, bottom + 4);
    ctx.moveTo(MARGIN.left - 4, bottom - px);
    ctx.lineTo(MARGIN.left, bottom - px);
    ctx.stroke();
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillText(label, MARGIN.left + px, bottom + 6);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ctx.fillText(label, MARGIN.left - 6, bottom - px);
  }
  ctx.font = 'italic 12px system-ui, sans-serif';
  ctx.textAlign = 'right';
  ctx.textBaseline = 'bottom';
  ctx.fillText('x₁', MARGIN.left + size, bottom + 29);
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillText('x₂', 2, MARGIN.top);
}

// The colour scale under the output plot, in box: what the colours mean for this problem.
export function drawScale(box, regression) {
  const stops = Array.from({ length: 9 }, (_, i) => css(color(-1 + i / 4, 0.6)));
  const [low, mid, high, what] = regression ? ['−1', '0', '1', 'predicted value']
    : ['0', '0.5', '1', 'p(class 1): orange class 0, blue class 1'];
  box.innerHTML = `<span class="scale-bar" style="background: linear-gradient(90deg, ${stops.join(', ')})"></span>`
    + `<span class="scale-ticks"><span>${low}</span><span>${mid}</span><span>${high}</span></span>`
    + `<span class="scale-what">${what}</span>`;
}

// ---- the network diagram

const SVG_W = 340;
const SVG_H = 250;
const UNIT = 22;          // a unit's heatmap, px of the diagram

// Draws the network into svg: columns of units (inputs labelled by inputNames, hidden units as
// heatmaps of their values over the plane, outputs labelled by outputNames), weights as lines:
// blue positive, orange negative, wider the larger, the value on hover. frame: readFrame's, or
// null before the first frame (or for a model that is no chain of Linear layers): grey units.
export function drawNetwork(svg, widths, inputNames, outputNames, frame, shown = 8) {
  const drawn = frame?.widths.length ? frame.drawn : widths.map((n) => Math.min(n, shown));
  const left = 58;
  const right = 56;
  const xs = widths.map((_, i) => left + (i * (SVG_W - left - right)) / Math.max(1, widths.length - 1));
  const ys = drawn.map((k) => Array.from({ length: k }, (_, j) => SVG_H / 2 + 4 + (j - (k - 1) / 2) * Math.min(27, (SVG_H - 44) / k)));
  const weights = frame?.widths.length ? frame.weights : [];
  const biggest = Math.max(1e-6, ...weights.map((m) => m.reduce((a, v) => Math.max(a, Math.abs(v)), 0)));
  const unitName = (i, j) => (i === 0 ? inputNames[j] : i === widths.length - 1 ? outputNames[j] : `unit ${j + 1} of layer ${i}`);
  const parts = [];
  for (let i = 0; i + 1 < widths.length; i++) {
    ys[i + 1].forEach((y1, o) => ys[i].forEach((y0, j) => {
      const v = weights[i]?.[o * drawn[i] + j];
      const x0 = xs[i] + UNIT / 2;
      const x1 = xs[i + 1] - (i + 2 === widths.length ? 8 : UNIT / 2);
      if (v === undefined) {
        parts.push(`<line x1="${x0}" y1="${y0}" x2="${x1}" y2="${y1}"/>`);
        return;
      }
      const size = Math.abs(v) / biggest;  // inline style: the stylesheet's grey would win over attributes
      const style = `stroke: ${css(v >= 0 ? BLUE : ORANGE)}; stroke-width: ${(0.6 + 3 * size).toFixed(2)}; opacity: ${(0.25 + 0.75 * size).toFixed(2)}`;
      parts.push(`<line class="weight" x1="${x0}" y1="${y0}" x2="${x1}" y2="${y1}" style="${style}">`
        + `<title>weight ${v.toFixed(3)}: ${unitName(i, j)} → ${unitName(i + 1, o)}</title></line>`);
    }));
  }
  widths.forEach((n, i) => {
    const x = xs[i];
    const last = i === widths.length - 1;
    ys[i].forEach((y, j) => {
      if (last) {
        parts.push(`<circle class="out" cx="${x}" cy="${y}" r="7"/>`);
        parts.push(`<text class="name start" x="${x + 11}" y="${y + 4}">${outputNames[j] ?? ''}</text>`);
        return;
      }
      const map = frame?.maps[i];
      const at = `x="${x - UNIT / 2}" y="${y - UNIT / 2}" width="${UNIT}" height="${UNIT}"`;
      if (map) parts.push(`<image class="unit-map" ${at} href="${heatmapURL(map, j)}"><title>${unitName(i, j)}</title></image>`);
      parts.push(`<rect class="unit ${i === 0 ? 'in' : 'hid'}${map ? ' mapped' : ''}" ${at} rx="3"/>`);
      if (i === 0) parts.push(`<text class="name end" x="${x - UNIT / 2 - 4}" y="${y + 4}">${inputNames[j] ?? ''}</text>`);
    });
    const title = i === 0 ? 'inputs' : last ? 'output' : `${n} unit${n > 1 ? 's' : ''}`;
    parts.push(`<text x="${x}" y="12">${title}</text>`);
    if (n > drawn[i]) parts.push(`<text x="${x}" y="${SVG_H - 4}">+${n - drawn[i]} more</text>`);
  });
  svg.setAttribute('viewBox', `0 0 ${SVG_W} ${SVG_H}`);
  svg.innerHTML = parts.join('');
}

// Unit j of a drawn column's values on the grid as an image (a data: URL), on the output's colours.
const mapCanvas = document.createElement('canvas');
mapCanvas.width = mapCanvas.height = GRID;
function heatmapURL(map, j) {
  const image = new ImageData(GRID, GRID);
  for (let p = 0; p < GRID * GRID; p++) image.data.set([...color(unitValue(map, p, j), 0.8), 255], 4 * p);
  mapCanvas.getContext('2d').putImageData(image, 0, 0);
  return mapCanvas.toDataURL();
}

// ---- the loss chart

const HEIGHT = 180;

// The training and test loss against the step, in box; returns a function that sets the curves
// ([steps, training loss, test loss]).
export function lossChart(box) {
  const chart = new uPlot({
    width: box.clientWidth || 360, height: HEIGHT,
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max ?? 1, 0.05)] } },
    axes: [stepAxis('step', 40),
           { ...lossAxis('loss', 56), labelSize: 18 }],
    legend: { live: false },
    cursor: { show: false },
    series: [{}, { label: 'training loss', stroke: '#f59322', width: 2, points: { show: false } },
             { label: 'test loss', stroke: '#0b3d63', width: 2, points: { show: false } }],
  }, [[], [], []], box);
  new ResizeObserver(() => chart.setSize({ width: box.clientWidth, height: HEIGHT })).observe(box);
  return (curves) => chart.setData(curves);
}
