// "Where the time goes": the panel under each view's loss chart (index.html's time-chart template):
// a bar per kernel family (the shaders/<family>.wgsl that ran) of the GPU time of a training step,
// from the worker's last profile of a few steps (worker_python.js's StepProfiler, step_profile.py).
// The worker profiles a model once after its first steps; the panel's Profile button asks for
// another profile of the next steps.
import { $ } from './ui.js';
import { AUTO_AFTER, PROFILE_STEPS } from './worker_python.js';   // the worker's policy

// What each family's kernels compute, for the bars' tooltips.
const FAMILIES = {
  matmul: 'matrix products (Linear layers, convolutions, attention)',
  map: 'elementwise ops: activations, +, ×, casts, copies',
  reduce: 'sums, means, max and argmax over dims',
  loss: 'the fused cross-entropy and its gradient',
  optim: 'the optimizer’s fused update of the parameters',
  norm: 'layer norm and its gradient',
  attention: 'fused scaled dot-product attention',
  embedding: 'embedding lookups and their gradient',
  gather: 'indexing: gather and scatter-add',
  pool: 'max pooling and its gradient',
  fold: 'the gradient of convolutions’ sliding windows',
  random: 'random numbers (dropout, shuffling)',
  scan: 'running sums (cumsum)',
  sort: 'sorting (argsort, top-k)',
  grad_norm: 'gradient norms (clipping)',
  grad_scale: 'gradient clipping’s scaling',
};

// What the bars' element keeps of the profile shown, as data attributes (the tests read them).
const SHOWN = ['first', 'last', 'dispatches'];

const ms = (value) => (value >= 10 ? value.toFixed(0) : value >= 1 ? value.toFixed(1) : value.toFixed(2));

// The panel whose elements' ids start with prefix ('', 'mnist-', 'lm-'); post sends the worker a
// message, trains names the button that trains ('Play', 'Train') and training() says whether the view
// is training now. Returns {ready() (the worker can take requests), fresh() (a new model: no profile
// of it yet, and a request for the last one dropped, as the worker drops it), show(message) (the
// worker's '<prefix>profile')}.
export function timeChart(prefix, post, trains, training) {
  const [button, note, bars, measure] = ['profile', 'time-note', 'time-bars', 'time-measure']
    .map((id) => $(prefix + id));

  button.onclick = () => {
    post({ type: `${prefix}profile` });
    say(training() ? `Profiling the next ${PROFILE_STEPS} training steps…`
                   : `Press ${trains}: ${PROFILE_STEPS} steps of its training will be profiled, and training goes `
                     + 'on as usual after them.');
  };

  function say(text, kind = '') {
    note.textContent = text;
    note.className = `help ${kind}`;
  }

  function fresh() {
    bars.replaceChildren();
    for (const key of SHOWN) delete bars.dataset[key];
    measure.textContent = '';
    say(`Not profiled yet: ${PROFILE_STEPS} steps are profiled after the first ${AUTO_AFTER} of training, `
        + 'or press Profile.');
  }

  function show({ profile }) {
    if (profile.error) {
      say(`${profile.error} (training went on unprofiled).`, 'error');
      return;
    }
    const families = profile.families;
    const total = families.reduce((sum, f) => sum + f.ms, 0);
    const steps = profile.first === profile.last ? `step ${profile.first}` : `steps ${profile.first}–${profile.last}`;
    say(`Profiled ${steps}: ${Math.round(profile.dispatches)} dispatches a step, ${ms(total)} ms in all.`);
    bars.replaceChildren(...families.map((family) => bar(family, total)));
    for (const key of SHOWN) bars.dataset[key] = profile[key];
    measure.textContent = measured(profile);
  }

  fresh();
  return { ready: () => { button.disabled = false; }, fresh, show };
}

// The panel's statement of what was measured (step_profile.py's profile says how).
function measured({ timestamps, rounding_us: rounding }) {
  if (!timestamps) {
    return 'Measured without GPU timestamps (this browser’s WebGPU offers none): each dispatch was sent alone and '
      + 'waited for, so every bar includes that wait, small kernels look bigger than they are, and the total is '
      + 'more than a step takes in normal training.';
  }
  const own = 'Measured with GPU timestamps: each kernel’s own time on the GPU, every dispatch in a compute pass of '
    + 'its own';
  if (rounding === null) return `${own}.`;
  const steps = rounding > 0 ? `steps of ${rounding.toFixed(1)} µs` : 'steps longer than any kernel here took';
  return `${own}, but this browser rounds the timestamps to ${steps} (Chrome does so against timing `
    + 'attacks, unless chrome://flags/#enable-webgpu-developer-features is on). A kernel shorter than a step reads '
    + 'as none or a whole step, so the bars are rough, and a family of short kernels can read 0.';
}

// A family's row: name, a bar as long as its share of the step, and its ms a step and share.
function bar({ name, ms: time, calls }, total) {
  const share = total > 0 ? time / total : 0;
  const row = document.createElement('div');
  row.className = 'time-row';
  row.setAttribute('role', 'listitem');
  Object.assign(row.dataset, { family: name, ms: time, share, calls });
  const perStep = Math.round(calls);
  row.title = `${name}: ${FAMILIES[name] ?? `the kernels of shaders/${name}.wgsl`}; `
    + `${perStep} dispatch${perStep === 1 ? '' : 'es'} a step`;
  const [label, track, value] = ['span', 'span', 'span'].map((tag) => document.createElement(tag));
  label.className = 'time-name';
  label.textContent = name;
  track.className = 'time-track';
  const fill = document.createElement('span');
  fill.className = 'time-fill';
  fill.style.width = `${(100 * share).toFixed(1)}%`;
  track.append(fill);
  value.className = 'time-value';
  value.textContent = `${ms(time)} ms · ${share > 0 && share < 0.005 ? '<1' : Math.round(100 * share)}%`;
  row.append(label, track, value);
  return row;
}
