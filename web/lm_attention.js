// The language-model view's attention map: where the chosen layer's head looks from each of the
// prompt's characters, as a heat map with its colour scale. lm.js owns the model and the worker.
import { $ } from './ui.js';

// The heat map's colour scale, from weight 0 to 1 (light to dark blue).
const SCALE = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];

// A character as the page shows it: newlines, spaces and tabs would be invisible.
export const shown = (c) => ({ '\n': '↵', ' ': '␣', '\t': '⇥' })[c] ?? c;

// The map; prompt() is the prompt the user set, which may be longer than the model's block.
// Returns {show(maps), clear()}: show draws the worker's maps, {tokens, layers, heads, weights: Float32Array
// (layers, heads, T, T)}; clear leaves no map (the view has no model).
export function attentionMap(prompt) {
  let maps = null;
  $('lm-layer').onchange = $('lm-head').onchange = draw;
  drawScale();
  new ResizeObserver(draw).observe($('lm-attention-box'));

  function show(next) {
    maps = next;
    const pick = (id, count, word) => {
      const keep = Math.min(Number($(id).value) || 0, count - 1);
      $(id).replaceChildren(...Array.from({ length: count }, (_, i) => new Option(`${word} ${i + 1}`, i)));
      $(id).value = keep;
    };
    pick('lm-layer', maps.layers, 'Layer');
    pick('lm-head', maps.heads, 'Head');
    draw();
  }

  function clear() {
    maps = null;
    const canvas = $('lm-attention');
    canvas.width = canvas.height = 0;
    canvas.style.width = canvas.style.height = '0px';
    delete canvas.dataset.tokens;
    delete canvas.dataset.weights;
    $('lm-layer').replaceChildren();
    $('lm-head').replaceChildren();
    $('lm-attention-note').textContent = '';
  }

  // The chosen head's weights as a heat map: row i is the prompt's i-th character, and its cells
  // the weights it gives the characters up to it (they sum to 1; later ones get none).
  function draw() {
    if (!maps) return;
    const canvas = $('lm-attention');
    const tokens = [...maps.tokens];
    const t = tokens.length;
    const at = (Number($('lm-layer').value) * maps.heads + Number($('lm-head').value)) * t * t;
    const rows = Array.from({ length: t }, (_, i) => Array.from(maps.weights.subarray(at + i * t, at + (i + 1) * t)));
    canvas.dataset.tokens = maps.tokens;
    canvas.dataset.weights = JSON.stringify(rows);   // what the map shows, for a reader or a test

    const ratio = window.devicePixelRatio || 1;
    const margin = 22;   // room for the characters along the top and the left
    const cell = Math.min(44, (($('lm-attention-box').clientWidth || 360) - margin) / t);
    const side = margin + cell * t;
    canvas.width = canvas.height = Math.round(side * ratio);
    canvas.style.width = canvas.style.height = `${side}px`;
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, side, side);
    rows.forEach((row, i) => row.forEach((w, j) => {
      ctx.fillStyle = j > i ? '#f2f4f7' : `rgb(${colour(w)})`;
      ctx.fillRect(margin + j * cell, margin + i * cell, cell - 0.5, cell - 0.5);
    }));
    if (cell >= 8) {
      ctx.fillStyle = '#344054';
      ctx.font = `${Math.min(14, cell * 0.8)}px ui-monospace, "DejaVu Sans Mono", monospace`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      tokens.forEach((c, i) => {
        ctx.fillText(shown(c), margin + (i + 0.5) * cell, margin / 2);
        ctx.fillText(shown(c), margin / 2, margin + (i + 0.5) * cell);
      });
    }
    canvas.onmousemove = (e) => {
      const box = canvas.getBoundingClientRect();
      const [j, i] = [Math.floor((e.clientX - box.left - margin) / cell), Math.floor((e.clientY - box.top - margin) / cell)];
      canvas.title = i >= 0 && j >= 0 && i < t && j <= i
        ? `${shown(tokens[i])} (position ${i + 1}) → ${shown(tokens[j])} (position ${j + 1}): ${rows[i][j].toFixed(3)}`
        : '';
    };
    $('lm-attention-note').textContent = [...prompt()].length > t
      ? `The last ${t} characters of the prompt (the model’s block).` : '';
  }

  function drawScale() {
    const canvas = $('lm-scale');
    const ctx = canvas.getContext('2d');
    for (let x = 0; x < canvas.width; x++) {
      ctx.fillStyle = `rgb(${colour(x / (canvas.width - 1))})`;
      ctx.fillRect(x, 0, 1, canvas.height);
    }
  }

  return { show, clear };
}

// A weight in [0, 1] as an [r, g, b] of SCALE, linearly between its stops.
function colour(w) {
  const x = Math.min(1, Math.max(0, w)) * (SCALE.length - 1);
  const i = Math.min(SCALE.length - 2, Math.floor(x));
  return SCALE[i].map((v, k) => Math.round(v + (SCALE[i + 1][k] - v) * (x - i)));
}
