// How a view's training steps run, a setting of every view (the toy playground's calls it stepping):
// eagerly (each op as the Python reaches it) or replayed (wg.jit: the first two steps run the Python
// and record their GPU work, the others replay it). Replayed steps skip Python's cost per op, which
// is most of a small model's step on a GPU (several times the steps a second there); on a software
// GPU the kernels' time is most of a step and replaying gains next to nothing (bench/NOTES.md), so
// there the steps run as written, each op in turn, unless the user asks.
export const STEP_CHOICES = ['eager', 'replayed'];
export const STEP_LABELS = { eager: 'eagerly', replayed: 'replayed (wg.jit)' };
export const STEP_HINT = 'Replayed: the first two steps record their GPU work (wg.jit) and the others replay it, '
  + "without Python's cost per op";
export const stepFor = (software) => (software ? 'eager' : 'replayed');
