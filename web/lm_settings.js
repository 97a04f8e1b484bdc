// The language-model view's settings: the choices the page offers, their defaults, and the URL
// hash that carries them, so that a link opens the view as it was. lm.js shows and uses them.
import { oneOfEach, settingsFromHash, wholeNumber } from './link_settings.js';
import { STEP_CHOICES, STEP_LABELS } from './step_settings.js';

// Model sizes, named on the page in words; the two smaller ones suit a software GPU.
export const SIZES = {
  tiny: { n_layer: 1, n_head: 2, n_embd: 32, block_size: 16 },
  small: { n_layer: 2, n_head: 4, n_embd: 64, block_size: 32 },
  medium: { n_layer: 4, n_head: 4, n_embd: 128, block_size: 64 },
  large: { n_layer: 6, n_head: 6, n_embd: 192, block_size: 128 },
};
export const FAST_ON_SOFTWARE = ['tiny', 'small'];
export const LM_CHOICES = {
  corpus: ['names', 'shakespeare', 'custom'],
  size: Object.keys(SIZES),
  lr: ['0.0003', '0.001', '0.003', '0.01'],
  batch: ['16', '32', '64'],
  steps: ['50', '100', '200', '500', '1000', '2000', '5000'],
  every: ['25', '50', '100', '200', '500'],
  topk: ['0', '1', '3', '5', '10', '20'],
  step: STEP_CHOICES,
};
// size, step and prompt: null until known (the adapter's size and how its steps run, the corpus's prompt).
const DEFAULTS = { corpus: 'names', size: null, lr: '0.003', batch: '32', steps: '500', every: '100', step: null,
                   seed: 1, temperature: 0.8, topk: '0', prompt: null };
export const PROMPTS = { names: 'Emma\nOli', shakespeare: 'ROMEO:\nBut, soft! what light', custom: '' };
export const LABELS = { names: 'English first names', shakespeare: 'Shakespeare', custom: 'Your own text', 0: 'all',
                         ...STEP_LABELS };
export const MAX_PROMPT = 200;

// A model size in words: "6 layers, 6 heads, width 192, block 128"; brief: "6 layers, width 192", which
// the size menu shows (the page says the rest under the chart).
export function sizeLabel(c, brief = false) {
  const s = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return brief ? `${s(c.n_layer, 'layer')}, width ${c.n_embd}`
               : `${s(c.n_layer, 'layer')}, ${s(c.n_head, 'head')}, width ${c.n_embd}, block ${c.block_size}`;
}

export const SEED = wholeNumber(0, 99999);

// What a link may set each setting to (link_settings.js).
const LINK_READERS = {
  ...oneOfEach(LM_CHOICES),
  seed: SEED,
  temperature: { read: (value) => (validTemperature(Number(value)) ? Number(value) : undefined),
                 allowed: '0.1 to 2 in steps of 0.1' },
  prompt: { read: (value) => (value.length <= MAX_PROMPT ? value : undefined), allowed: `at most ${MAX_PROMPT} characters` },
};

// Settings from a URL hash such as "#view=lm&corpus=shakespeare&size=small"; bad values fall back to
// defaults, each one pushed to corrections as {key, value, allowed, using} (allowed null: no such setting).
export function lmFromHash(hash, corrections = []) {
  return settingsFromHash(hash, DEFAULTS, LINK_READERS, corrections);
}

const validTemperature = (t) => t >= 0.1 && t <= 2 && Math.abs(t * 10 - Math.round(t * 10)) < 1e-9;

export function lmToHash(settings) {
  const params = new URLSearchParams({ view: 'lm' });
  for (const key of Object.keys(DEFAULTS)) if (settings[key] !== null) params.set(key, settings[key]);
  return '#' + params.toString();
}
