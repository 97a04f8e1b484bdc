// The language-model view's settings: the choices the page offers, their defaults, and the URL
// hash that carries them, so that a link opens the view as it was. lm.js shows and uses them.

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
};
// size and prompt: null until known (the adapter's size, the corpus's prompt).
const DEFAULTS = { corpus: 'names', size: null, lr: '0.003', batch: '32', steps: '500', every: '100', seed: 1,
                   temperature: 0.8, topk: '0', prompt: null };
export const PROMPTS = { names: 'Emma\nOli', shakespeare: 'ROMEO:\nBut, soft! what light', custom: '' };
export const LABELS = { names: 'English first names', shakespeare: 'Shakespeare', custom: 'Your own text', 0: 'all' };
export const MAX_PROMPT = 200;

export function sizeLabel(c) {
  const s = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${s(c.n_layer, 'layer')}, ${s(c.n_head, 'head')}, width ${c.n_embd}, block ${c.block_size}`;
}

// Settings from a URL hash such as "#view=lm&corpus=shakespeare&size=small"; bad values fall back to
// defaults, each one pushed to corrections as {key, value, allowed, using} (allowed null: no such setting).
export function lmFromHash(hash, corrections = []) {
  const settings = { ...DEFAULTS };
  for (const [key, value] of new URLSearchParams(hash.replace(/^#/, ''))) {
    if (LM_CHOICES[key]?.includes(value)) settings[key] = value;
    else if (key === 'seed' && /^\d{1,5}$/.test(value)) settings.seed = Number(value);
    else if (key === 'temperature' && validTemperature(Number(value))) settings.temperature = Number(value);
    else if (key === 'prompt' && value.length <= MAX_PROMPT) settings.prompt = value;
    else if (key !== 'view') corrections.push({ key, value, allowed: ALLOWED[key] ?? null, using: DEFAULTS[key] ?? 'the default' });
  }
  return settings;
}

// What a link may set each setting to, in words (for the settings that are no list of choices).
const ALLOWED = { ...Object.fromEntries(Object.entries(LM_CHOICES).map(([k, v]) => [k, `one of ${v.join(', ')}`])),
                  seed: 'a whole number from 0 to 99999', temperature: '0.1 to 2 in steps of 0.1',
                  prompt: `at most ${MAX_PROMPT} characters` };

const validTemperature = (t) => t >= 0.1 && t <= 2 && Math.abs(t * 10 - Math.round(t * 10)) < 1e-9;

export function lmToHash(settings) {
  const params = new URLSearchParams({ view: 'lm' });
  for (const key of Object.keys(DEFAULTS)) if (settings[key] !== null) params.set(key, settings[key]);
  return '#' + params.toString();
}
