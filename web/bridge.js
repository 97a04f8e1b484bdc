// The browser side of webgrad's WebGPU driver (py/webgrad/backends/webgpu/browser.py calls it).
//
// It mirrors the native driver (native.py): GPU objects live here and Python holds small
// integer handles. Python crosses into JS with few, coarse calls: one per buffer upload or
// readback, one per pipeline, and ONE per submit, carrying every queued dispatch as a params
// blob (Uint8Array) and a flat Int32Array of records:
//     [pipeline, paramsOffset, x, y, z, nBuffers, buffer handle × nBuffers] per dispatch.
// Every kernel binds @binding(0) to a PARAMS_BYTES window of one shared "params arena", chosen
// per dispatch with a dynamic offset; storage buffers follow at @binding(1), @binding(2), ...

const PARAMS_BYTES = 256;
const ARENA_MIN_BYTES = 64 * 1024;
// Bind groups kept for reuse: pooled buffers meet in ever new combinations over a long run, so the
// cache starts over past this size (at a submit, when no pass is using it).
const GROUPS_KEPT = 16384;
// The start of the message every call rejects with once the device is lost (browser.py looks for it).
const LOST = 'device-lost: ';
const RAISED_LIMITS = [  // raised from the WebGPU defaults to what the adapter offers, as natively
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
];
const REPORTED_LIMITS = [...RAISED_LIMITS, 'maxComputeWorkgroupsPerDimension', 'minStorageBufferOffsetAlignment'];
const snake = (name) => name.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());

export class Bridge {
  constructor() {
    this.device = null;
    this.next = 1;
    this.buffers = new Map();     // handle -> GPUBuffer
    this.pipelines = new Map();   // handle -> {pipeline, layout: GPUBindGroupLayout, bindings}
    this.layouts = new Map();     // bindings "read_write,read" -> {group, pipeline} layouts
    this.groups = new Map();      // "bindings|h1,h2" -> GPUBindGroup (all of them bind the arena)
    this.groupsOf = new Map();    // buffer handle -> Set of keys in groups that bind it
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

  // Finds the adapter and opens the device. Returns JSON {info, limits, isSoftware}, or rejects with a
  // message a person can act on.
  async init() {
    if (!navigator.gpu) throw new Error('no-webgpu: this browser does not expose WebGPU (navigator.gpu)');
    const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) throw new Error('no-adapter: WebGPU is present but no GPU adapter is available');
    const requiredLimits = {};
    for (const k of RAISED_LIMITS) requiredLimits[k] = adapter.limits[k];
    this.device = await adapter.requestDevice({ label: 'webgrad', requiredLimits });
    this.device.lost.then((info) => {
      this.lost = info.message || info.reason || 'unknown reason';
      this.onLost(this.lost);
    });
    this.device.addEventListener('uncapturederror', (e) => this.onError(`WebGPU error: ${e.error.message}`));
    this.arena = this.makeArena(ARENA_MIN_BYTES);
    const ai = adapter.info;
    const limits = {};
    for (const k of REPORTED_LIMITS) limits[snake(k)] = this.device.limits[k];
    return JSON.stringify({
      info: { name: ai.description || ai.device || ai.architecture || 'WebGPU adapter', vendor: ai.vendor,
              architecture: ai.architecture, backend: 'browser', adapter_type: ai.isFallbackAdapter ? 'CPU' : 'GPU' },
      limits,
      // SwiftShader (Chromium's software fallback) is what headless Chromium offers without a GPU.
      isSoftware: Boolean(ai.isFallbackAdapter || ai.architecture === 'swiftshader'),
    });
  }

  makeArena(size) {
    return this.device.createBuffer({ label: 'webgrad-params', size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  }

  // ---- buffers (sizes and offsets arrive word-aligned: browser.py aligns them)

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

  async readBuffer(handle, offset, size) {
    this.check();
    if (!this.staging || this.staging.size < size) {
      this.staging?.destroy();
      this.staging = this.device.createBuffer({ size: Math.max(size, 4096), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    }
    const staging = this.staging;
    const encoder = this.device.createCommandEncoder();
    encoder.copyBufferToBuffer(this.buffers.get(handle), offset, staging, 0, size);
    this.device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ, 0, size);
    const out = new Uint8Array(staging.getMappedRange(0, size).slice(0));
    staging.unmap();
    return out;
  }

  destroyBuffer(handle) {
    this.buffers.get(handle).destroy();   // frees the GPU memory now, not when JS collects the object
    this.buffers.delete(handle);
    for (const key of this.groupsOf.get(handle) ?? []) {
      this.groups.delete(key);
      // unlink the group from its other buffers too, so long-lived buffers collect no dead keys
      for (const other of key.split('|')[1].split(',')) {
        if (Number(other) !== handle) this.groupsOf.get(Number(other))?.delete(key);
      }
    }
    this.groupsOf.delete(handle);
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

  // bindings: "read_write,read,..." for @binding(1..). Rejects with the compiler's messages.
  async createPipeline(label, wgsl, entry, bindings) {
    this.check();
    // The scope catches the shader's validation error, which would otherwise also surface as an
    // uncaptured error; the compiler's own messages say more than the pipeline's rejection.
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ label, code: wgsl });
    const moduleError = this.device.popErrorScope();
    const layout = this.layout(bindings);
    let pipeline;
    try {
      pipeline = await this.device.createComputePipelineAsync({ label, layout: layout.pipeline, compute: { module, entryPoint: entry } });
    } catch (e) {
      const info = await module.getCompilationInfo();
      const lines = info.messages.map((m) => `${m.type} at line ${m.lineNum}:${m.linePos}: ${m.message}`);
      throw new Error(lines.length ? lines.join('\n') : (await moduleError)?.message ?? e.message);
    }
    const handle = this.next++;
    this.pipelines.set(handle, { pipeline, bindings });
    return handle;
  }

  // ---- execution

  submit(params, records) {
    this.check();
    if (this.groups.size > GROUPS_KEPT) {
      this.groups.clear();
      this.groupsOf.clear();
    }
    let needed = params.byteLength;
    for (let i = 0; i < records.length; i += 6 + records[i + 5]) needed = Math.max(needed, records[i + 1] + PARAMS_BYTES);
    if (needed > this.arena.size) {
      // The old arena is only dropped: submitted work keeps it alive. Every cached group binds it.
      this.arena = this.makeArena(2 ** Math.ceil(Math.log2(needed)));
      this.groups.clear();
      this.groupsOf.clear();
    }
    if (params.byteLength) this.device.queue.writeBuffer(this.arena, 0, params);
    const encoder = this.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (let i = 0; i < records.length;) {
      const [pipelineHandle, offset, x, y, z, n] = records.subarray(i, i + 6);
      const handles = records.subarray(i + 6, i + 6 + n);
      i += 6 + n;
      const { pipeline, bindings } = this.pipelines.get(pipelineHandle);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, this.bindGroup(bindings, handles), [offset]);
      pass.dispatchWorkgroups(x, y, z);
    }
    pass.end();
    this.device.queue.submit([encoder.finish()]);
  }

  bindGroup(bindings, handles) {
    const key = `${bindings}|${handles.join(',')}`;
    let group = this.groups.get(key);
    if (!group) {
      const entries = [{ binding: 0, resource: { buffer: this.arena, offset: 0, size: PARAMS_BYTES } }];
      handles.forEach((h, i) => entries.push({ binding: i + 1, resource: { buffer: this.buffers.get(h) } }));
      group = this.device.createBindGroup({ layout: this.layout(bindings).group, entries });
      this.groups.set(key, group);
      for (const h of handles) {
        if (!this.groupsOf.has(h)) this.groupsOf.set(h, new Set());
        this.groupsOf.get(h).add(key);
      }
    }
    return group;
  }

  async sync() {
    this.check();
    await this.device.queue.onSubmittedWorkDone();
  }
}
