// The browser side of webgrad's WebGPU driver: browser.py calls it, and it translates those calls
// to navigator.gpu. It decides nothing: the runtime (py/webgrad/backends/webgpu/runtime.py) sizes
// buffers and the params arena, aligns reads and writes, and chooses which bind groups to make and
// drop; GPU objects live here under the integer handles and ids it hands over.
//
// Python crosses into JS with few, coarse calls: one per buffer upload or readback, one per
// pipeline, and ONE per submit, carrying a params blob (Uint8Array) for the arena and a flat
// Int32Array of records (see submit); a timed submit (submitTimed, webgrad.profiler's) is one too.
// Every kernel binds @binding(0) to one params block of the arena, chosen per dispatch with a
// dynamic offset; storage buffers follow at @binding(1), @binding(2), ...

// The start of the message every call rejects with once the device is lost (browser.py looks for it).
const LOST = 'device-lost: ';

// Stop's interrupt (worker_python.js) is a shared byte that Python polls, but not while it waits here
// for the GPU: these waits give up when it is set, rejecting with INTERRUPTED, which browser.py raises
// as KeyboardInterrupt (the GPU finishes the work unobserved); see interruptible().
const INTERRUPTED = 'KeyboardInterrupt: Stop came while Python waited for the GPU';
const INTERRUPT_POLL_MS = 25;
// The start of a submit's rejection when a kernel it runs failed to compile; the kernel's label follows.
const COMPILE_FAILED = 'compile-failed: ';

// The first requestAdapter() of a fresh browser can answer null though a GPU is there (seen in
// Chromium on Linux with an NVIDIA GPU: the next call returns it), so it is asked a few times.
const ADAPTER_TRIES = 4;
const ADAPTER_RETRY_MS = 250;

// The GPU adapter, or a rejection whose message starts 'no-webgpu:' (no navigator.gpu) or
// 'no-adapter:' (WebGPU is there but offers no adapter).
export async function findAdapter() {
  if (!navigator.gpu) throw new Error('no-webgpu: this browser does not expose WebGPU (navigator.gpu)');
  for (let i = 0; i < ADAPTER_TRIES; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, ADAPTER_RETRY_MS * i));
    const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (adapter) return adapter;
  }
  throw new Error(`no-adapter: WebGPU is present but offered no GPU adapter (asked ${ADAPTER_TRIES} times)`);
}

// What the page shows of an adapter (GPUAdapterInfo): its name is the description the browser gives
// (often empty, for privacy) and the vendor and architecture, as "nvidia hopper".
export function describe(adapter) {
  const ai = adapter.info;
  const family = [ai.vendor, ai.architecture].filter(Boolean).join(' ');
  const detail = ai.description || ai.device;
  const name = [detail, family].filter(Boolean).join(' · ') || 'a GPU the browser does not name';
  return {
    name, vendor: ai.vendor, architecture: ai.architecture, backend: 'browser',
    adapter_type: ai.isFallbackAdapter ? 'CPU' : 'GPU',
    // SwiftShader (Chromium's software fallback) is what headless Chromium offers without a GPU.
    isSoftware: Boolean(ai.isFallbackAdapter || ai.architecture === 'swiftshader'),
  };
}

export class Bridge {
  // adapter: findAdapter()'s, when the worker found it before loading Python.
  constructor(adapter = null) {
    this.adapter = adapter;
    this.interrupt = null;        // Stop's shared byte (a Uint8Array), once the worker has it
    this.device = null;
    this.next = 1;
    this.buffers = new Map();     // handle -> GPUBuffer
    this.pipelines = new Map();   // handle -> {pipeline, layout: GPUBindGroupLayout}
    this.layouts = new Map();     // bindings "read_write,read" -> {group, pipeline} layouts
    this.groups = new Map();      // id -> GPUBindGroup (all of them bind the arena)
    this.arena = null;            // the params arena
    this.paramsBytes = 0;         // one dispatch's params block: what each bind group binds of the arena
    this.staging = null;          // MAP_READ buffer for readbacks, grown on demand
    this.onError = (message) => console.error(message);  // the worker shows device errors to the user
    this.lost = null;             // why the device was lost, once it is
    // Called once when the device is lost; the worker can tell the page, which offers a reload.
    this.onLost = (reason) => this.onError(`WebGPU device lost: ${reason}`);
  }

  // Every call that needs the device starts here: once it is lost, each one fails the same clear way.
  check() {
    if (this.lost !== null) throw new Error(LOST + this.lost);
  }

  // Opens the device on adapter (findAdapter's) with the limits named in `raised` raised to what the
  // adapter offers and those of the optional `features` it has. Returns JSON {info: describe(adapter),
  // limits: the `reported` ones by name, isSoftware, features: those granted}, or rejects with a
  // message a person can act on.
  async init(raised, reported, features) {
    const adapter = this.adapter ?? await findAdapter();
    const requiredLimits = Object.fromEntries(raised.map((k) => [k, adapter.limits[k]]));
    const requiredFeatures = Array.from(features).filter((f) => adapter.features.has(f));
    this.device = await adapter.requestDevice({ label: 'webgrad', requiredLimits, requiredFeatures });
    this.device.lost.then((info) => {
      this.lost = info.message || info.reason || 'unknown reason';
      this.onLost(this.lost);
    });
    this.device.addEventListener('uncapturederror', (e) => this.onError(`WebGPU error: ${e.error.message}`));
    const limits = Object.fromEntries(reported.map((k) => [k, this.device.limits[k]]));
    const info = describe(adapter);
    return JSON.stringify({ info, limits, isSoftware: info.isSoftware, features: requiredFeatures });
  }

  // ---- buffers (sizes and offsets arrive word-aligned: the runtime aligns them)

  createBuffer(size) {
    this.check();
    const handle = this.next++;
    this.buffers.set(handle, this.device.createBuffer({
      size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    }));
    return handle;
  }

  writeBuffer(handle, offset, bytes) {
    this.check();
    this.device.queue.writeBuffer(this.buffers.get(handle), offset, bytes);
  }

  // regions: [handle, offset, size] per region. Returns their bytes back to back, copied into one
  // staging buffer and mapped once (the runtime reads its index error words along with each value).
  async readBuffers(regions) {
    this.check();
    let size = 0;
    for (let i = 2; i < regions.length; i += 3) size += regions[i];
    if (!this.staging || this.staging.size < size) {
      this.staging?.destroy();
      this.staging = this.device.createBuffer({ size: Math.max(size, 4096), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    }
    const staging = this.staging;
    const encoder = this.device.createCommandEncoder();
    for (let i = 0, at = 0; i < regions.length; at += regions[i + 2], i += 3) {
      encoder.copyBufferToBuffer(this.buffers.get(regions[i]), regions[i + 1], staging, at, regions[i + 2]);
    }
    this.device.queue.submit([encoder.finish()]);
    try {
      await this.interruptible(staging.mapAsync(GPUMapMode.READ, 0, size));
    } catch (e) {
      if (this.staging === staging) this.staging = null;   // still mapping: the next read makes another
      throw e;
    }
    const out = new Uint8Array(staging.getMappedRange(0, size).slice(0));
    staging.unmap();
    return out;
  }

  // groups: the ids of the bind groups that bind the buffer, which go with it.
  destroyBuffer(handle, groups) {
    this.buffers.get(handle).destroy();   // frees the GPU memory now, not when JS collects the object
    this.buffers.delete(handle);
    for (const id of groups) this.groups.delete(id);
  }

  // ---- pipelines

  layout(bindings) {
    let layout = this.layouts.get(bindings);
    if (!layout) {
      const compute = GPUShaderStage.COMPUTE;
      const entries = [{ binding: 0, visibility: compute, buffer: { type: 'read-only-storage', hasDynamicOffset: true } }];
      bindings.split(',').forEach((access, i) => entries.push({
        binding: i + 1, visibility: compute, buffer: { type: access === 'read' ? 'read-only-storage' : 'storage' },
      }));
      const group = this.device.createBindGroupLayout({ entries });
      layout = { group, pipeline: this.device.createPipelineLayout({ bindGroupLayouts: [group] }) };
      this.layouts.set(bindings, layout);
    }
    return layout;
  }

  // bindings: "read_write,read,..." for @binding(1..). Returns the pipeline's handle at once: the
  // compile goes on without Python waiting for it (Dawn compiles async pipelines on worker threads,
  // so the kernels a step asks for compile side by side), and submit waits for the ones it runs.
  createPipeline(label, wgsl, entry, bindings) {
    this.check();
    // The scope catches the shader's validation error, which would otherwise also surface as an
    // uncaptured error; the compiler's own messages say more than the pipeline's rejection.
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ label, code: wgsl });
    const moduleError = this.device.popErrorScope();
    const layout = this.layout(bindings);
    const handle = this.next++;
    const kernel = { pipeline: null, layout: layout.group, compiling: null };
    const started = performance.now();
    kernel.compiling = this.device.createComputePipelineAsync({ label, layout: layout.pipeline, compute: { module, entryPoint: entry } })
      .then((pipeline) => {
        kernel.pipeline = pipeline;
        kernel.compiling = null;
        // A User Timing entry per compile (DevTools' Performance panel; bench/page_first_step.py reads them).
        performance.measure(`webgrad compile ${label}`, { start: started });
      }, async (e) => {
        const info = await module.getCompilationInfo();
        const lines = info.messages.map((m) => `${m.type} at line ${m.lineNum}:${m.linePos}: ${m.message}`);
        throw new Error(`${COMPILE_FAILED}${label}\n${lines.length ? lines.join('\n') : (await moduleError)?.message ?? e.message}`);
      });
    kernel.compiling.catch(() => {});   // reported by the submit that needs it, not as unhandled
    this.pipelines.set(handle, kernel);
    return handle;
  }

  // ---- execution

  // The params arena, replacing the last one (work already submitted keeps that alive).
  createArena(size, paramsBytes) {
    this.check();
    this.arena = this.device.createBuffer({
      label: 'webgrad-params', size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    this.paramsBytes = paramsBytes;
  }

  forgetBindGroups() {
    this.groups.clear();
  }

  // params: the arena's contents. records: first, up to groupsEnd, the bind groups to make,
  //     [id, pipeline whose layout it has, n, buffer handle × n] each;
  // then the dispatches, [pipeline, bind group id, params offset, x, y, z] each.
  // Returns nothing, or, while kernels it runs are still compiling, a promise of the submit made once
  // they are (rejecting with COMPILE_FAILED and the compiler's messages when one fails). The bind
  // groups are made at once either way (a layout needs no compiled pipeline): a wait that Stop ends
  // leaves them made, as the runtime counts on.
  submit(params, records, groupsEnd) {
    return this.afterCompiles(records, groupsEnd, () => this.encode(params, records, groupsEnd));
  }

  // submit's work timed (webgrad.profiler's, on a device granted "timestamp-query"): each dispatch in
  // a compute pass of its own that writes a timestamp as it begins and ends. Returns a promise of
  // those timestamps (a BigUint64Array of nanoseconds, begin and end per dispatch), read back once
  // the work is done.
  async submitTimed(params, records, groupsEnd) {
    await this.afterCompiles(records, groupsEnd, () => null);
    return this.encodeTimed(params, records, groupsEnd);
  }

  // Makes submit's bind groups, then run(), at once or (a promise) once the kernels it runs compiled.
  afterCompiles(records, groupsEnd, run) {
    this.makeBindGroups(records, groupsEnd);
    const compiling = new Set();
    for (let i = groupsEnd; i < records.length; i += 6) {
      const pending = this.pipelines.get(records[i]).compiling;
      if (pending) compiling.add(pending);
    }
    if (compiling.size) return this.interruptible(Promise.all(compiling)).then(run);
    return run();
  }

  encode(params, records, groupsEnd) {
    this.check();
    this.device.queue.writeBuffer(this.arena, 0, params);
    const encoder = this.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    this.encodeDispatches(pass, records, groupsEnd, records.length);
    pass.end();
    this.device.queue.submit([encoder.finish()]);
  }

  async encodeTimed(params, records, groupsEnd) {
    this.check();
    this.device.queue.writeBuffer(this.arena, 0, params);
    const count = (records.length - groupsEnd) / 3;   // two timestamps a dispatch
    const querySet = this.device.createQuerySet({ type: 'timestamp', count });
    const resolved = this.device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const readback = this.device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = this.device.createCommandEncoder();
    for (let i = groupsEnd, query = 0; i < records.length; i += 6, query += 2) {
      const pass = encoder.beginComputePass({
        timestampWrites: { querySet, beginningOfPassWriteIndex: query, endOfPassWriteIndex: query + 1 },
      });
      this.encodeDispatches(pass, records, i, i + 6);
      pass.end();
    }
    encoder.resolveQuerySet(querySet, 0, count, resolved, 0);
    encoder.copyBufferToBuffer(resolved, 0, readback, 0, 8 * count);
    this.device.queue.submit([encoder.finish()]);
    try {
      await this.interruptible(readback.mapAsync(GPUMapMode.READ));
      return new BigUint64Array(readback.getMappedRange().slice(0));
    } finally {
      for (const done of [querySet, resolved, readback]) done.destroy();
    }
  }

  // The dispatches of records[from, to) into pass, the pipeline set once for a run of one kernel.
  encodeDispatches(pass, records, from, to) {
    let current = null;
    for (let i = from; i < to; i += 6) {
      const pipeline = records[i];
      if (pipeline !== current) {   // a run of one kernel (a common case) sets it once
        pass.setPipeline(this.pipelines.get(pipeline).pipeline);
        current = pipeline;
      }
      pass.setBindGroup(0, this.groups.get(records[i + 1]), [records[i + 2]]);
      pass.dispatchWorkgroups(records[i + 3], records[i + 4], records[i + 5]);
    }
  }

  // submit's first part alone: what a submit of work compiled ahead and never run leaves made.
  makeBindGroups(records, groupsEnd) {
    this.check();
    for (let i = 0; i < groupsEnd;) {
      const [id, pipeline, n] = records.subarray(i, i + 3);
      this.groups.set(id, this.bindGroup(pipeline, records.subarray(i + 3, i + 3 + n)));
      i += 3 + n;
    }
  }

  bindGroup(pipeline, handles) {
    const entries = [{ binding: 0, resource: { buffer: this.arena, offset: 0, size: this.paramsBytes } }];
    handles.forEach((h, i) => entries.push({ binding: i + 1, resource: { buffer: this.buffers.get(h) } }));
    return this.device.createBindGroup({ layout: this.pipelines.get(pipeline).layout, entries });
  }

  async sync() {
    this.check();
    await this.interruptible(this.device.queue.onSubmittedWorkDone());
  }

  // promise, or a rejection with INTERRUPTED as soon as Stop's interrupt is set. The wait takes the
  // interrupt (clears the byte): Python, suspended here, must not see it when it resumes, or Pyodide
  // raises the KeyboardInterrupt in its own event-loop code that resumes it, which then never does.
  async interruptible(promise) {
    const flag = this.interrupt;
    if (!flag) return promise;
    const taken = () => Atomics.exchange(flag, 0, 0) !== 0;
    let poll = 0;
    try {
      const value = await Promise.race([promise, new Promise((resolve, reject) => {
        poll = setInterval(() => taken() && reject(new Error(INTERRUPTED)), INTERRUPT_POLL_MS);
      })]);
      if (taken()) throw new Error(INTERRUPTED);
      return value;
    } finally {
      clearInterval(poll);
    }
  }
}
