// The peer's side of bench/page_mnist.py: the same two MNIST models, trained with the same loop as
// the webgrad script there (a pool of random batches of MNIST's shape, Adam, warm-up, one timed run
// that ends with a readback of the loss). TF.js wants channels last, so images are 28x28x1.

function buildModel(name) {
  const dense = (units, activation) => tf.layers.dense({ units, activation });
  if (name === 'mlp') {  // 784-128-10
    return tf.sequential({ layers: [tf.layers.flatten({ inputShape: [28, 28, 1] }), dense(128, 'relu'), dense(10)] });
  }
  // webgrad's nn.mnist_cnn: two (3x3 conv, padding 1, ReLU, 2x2 max pool) blocks, 32*7*7-128-10
  const conv = (filters, extra = {}) => tf.layers.conv2d({ filters, kernelSize: 3, padding: 'same', activation: 'relu', ...extra });
  const pool = () => tf.layers.maxPooling2d({ poolSize: 2 });
  return tf.sequential({ layers: [conv(16, { inputShape: [28, 28, 1] }), pool(), conv(32), pool(),
                                  tf.layers.flatten(), dense(128, 'relu'), dense(10)] });
}

// Where the GPU work runs: the WebGPU adapter, or the WebGL renderer.
async function deviceName(backend) {
  if (backend === 'webgpu') {
    const adapter = await navigator.gpu?.requestAdapter();
    const info = adapter?.info ?? {};
    return [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'unknown adapter';
  }
  const gl = tf.backend().gpgpu?.gl;
  const ext = gl?.getExtension('WEBGL_debug_renderer_info');
  return ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : 'unknown renderer';
}

// Steps per second of model `name` on `backend`: `warmup` synced steps, one synced probe step that
// sizes the timed run to about `seconds`, then that many steps and one readback of the last loss.
window.measureTraining = async (backend, name, { batch = 128, pool = 4, warmup = 3, seconds = 5, maxSteps = 200 } = {}) => {
  if (!(await tf.setBackend(backend))) throw new Error(`the ${backend} backend did not start`);
  await tf.ready();
  const model = buildModel(name);
  const optimizer = tf.train.adam(1e-3);
  const batches = Array.from({ length: pool }, (_, i) => ({
    x: tf.randomUniform([batch, 28, 28, 1], 0, 1, 'float32', 2 * i),
    y: tf.tidy(() => tf.oneHot(tf.randomUniform([batch], 0, 10, 'int32', 2 * i + 1), 10).toFloat()),
  }));
  let next = 0;
  const step = () => {
    const { x, y } = batches[next++ % pool];
    return optimizer.minimize(() => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true })), true);
  };
  const syncedStep = async () => {
    const loss = step();
    await loss.data();
    loss.dispose();
  };

  for (let i = 0; i < warmup; i++) await syncedStep();  // compiles the shaders, creates Adam's state
  let start = performance.now();
  await syncedStep();
  const probe = (performance.now() - start) / 1000;
  const steps = Math.max(2, Math.min(maxSteps, Math.round(seconds / probe)));

  start = performance.now();
  let loss = null;
  for (let i = 0; i < steps; i++) {
    loss?.dispose();  // freed once the queued work that reads it is done
    loss = step();
  }
  const value = (await loss.data())[0];
  const elapsed = (performance.now() - start) / 1000;
  loss.dispose();
  const device = await deviceName(backend);
  model.dispose();
  optimizer.dispose();
  for (const { x, y } of batches) tf.dispose([x, y]);
  return { backend: tf.getBackend(), device, steps, seconds: elapsed, loss: value, version: tf.version.tfjs };
};
