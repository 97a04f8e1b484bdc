// Reduction of a strided input over some of its dims. Each output's reduced elements are split
// into chunks of at most `span`, one workgroup per (output, chunk): no thread loops long (lavapipe
// silently ends a loop after 65535 iterations) and a large reduction spreads over many workgroups.
// With several chunks the backend reduces the per-chunk results again (kernels/reduce.py).
// Parameters (kernels/reduce.py's REDUCE_PARAMS): `outputs` results, each over the loop positions
// 0..`count` in `chunks` chunks of `span`; x's element at kept multi-index o and reduced multi-index
// j lies at `offset` plus o through kept_shape and kept_strides (kept_ndim dims) plus j through
// reduced_shape and reduced_strides (reduced_ndim dims). Workgroup (o, c)'s result goes to
// out[o * chunks + c], through store_epilogue (kernels/epilogue.py: under wg.jit the maps after a
// sum, a ReLU after a split K's pieces summed, run there, in the thread that stores it).
// Generated per op: T, the input's element type, identity, combine step, result, and how a loop
// position k names a reduced index j: k itself, or (arg ops' second pass) the index that chunk k
// picked, read from `picked`, so the value is read again from x.
alias T = {{compute}};

// out, x, picked (arg ops' second pass), then an epilogue's buffers (kernels/reduce.py)
{{bindings}}
{{epilogue}}

const THREADS: u32 = {{threads}}u;   // a workgroup's threads: kernels/reduce.py's REDUCE_THREADS (RUN_THREADS)
// per_thread steps from element to element by adds, working a position out from its index only
// where a run along the innermost reduced dim starts (a software adapter's form: there a division is
// a lane at a time; and a GPU's down columns, where it was a division per load); else (GPUs' short
// reductions, and arg ops' second pass, which reads its positions from picked) it works out every
// element's position.
const STEPPED: bool = {{stepped}};
const STEP_LOADS: u32 = {{step_loads}}u;

// A running reduction: its value, and the reduced index it was found at (arg ops).
struct Partial {
    value: T,
    index: u32,
}
const PARTIALS: u32 = THREADS;   // shaders/workgroup.wgsl's reduction over a workgroup

// b folded into a by the op's combine step (reduce merges one way: `how` is unused).
fn merge(a: Partial, b: Partial, how: u32) -> Partial {
    var acc = a.value;
    var at = a.index;
    let v = b.value;
    let j = b.index;
    {{combine}}
    return Partial(acc, at);
}

// Before any element: the op's identity, found at no index.
fn start() -> Partial {
    return Partial({{identity}}, 0xffffffffu);
}

// What out keeps of a reduction: its value, or (arg ops) its index.
fn result(r: Partial) -> {{out_type}} {
    return {{result}};
}

fn lowest_T() -> T { return {{lowest}}; }
fn highest_T() -> T { return {{highest}}; }

fn load(at: u32) -> T {
    return {{load}};
}

// Elements 4 * at to 4 * at + 3 (the runs form's loads: one vec4 where x is bound as vec4s).
fn load4(at: u32) -> vec4<T> {
    return {{load4}};
}

// Position in x where the reduced elements of kept multi-index `o` start.
fn kept_position(o: u32) -> u32 {
    var at = params_offset(0u);
    var rest = o;
    for (var d = params.kept_ndim; d > 0u; d--) {
        let size = params_kept_shape(d - 1u);
        at += (rest % size) * params_kept_strides(d - 1u);
        rest /= size;
    }
    return at;
}

// Position of reduced multi-index `j` from there.
fn reduced_position(j: u32) -> u32 {
    var at = 0u;
    var rest = j;
    for (var d = params.reduced_ndim; d > 0u; d--) {
        let size = params_reduced_shape(d - 1u);
        at += (rest % size) * params_reduced_strides(d - 1u);
        rest /= size;
    }
    return at;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let w = flat_id(wg, nwg);
    let o = w / params.chunks;
    let live = o < params.outputs;   // the whole workgroup must reach the barriers
    let first = (w % params.chunks) * params.span;
    let last = min(first + params.span, params.count);
    let base = kept_position(o);   // once: along the loop only j changes
    var mine = start();
    if (live) {
        for (var k = first + li; k < last; k += THREADS) {
            {{index}}
            mine = merge(mine, Partial(load(base + reduced_position(j)), j), 0u);
        }
    }
    let merged = workgroup_merge(mine, li, THREADS, 0u);
    if (li == 0u && live) {
        store_epilogue(w, result(merged));
    }
}

// One thread per (output, chunk), adjacent threads taking adjacent outputs: for short reductions
// (pooling windows, a few rows), where a workgroup per output would leave most of its threads idle,
// for reductions down columns, where adjacent outputs lie side by side in x (kernels/reduce.py):
// there a warp's loads are one run of memory, and for every pass on a software adapter, which has
// no workgroup barriers to pay then. Parameters and results as for main.
@compute @workgroup_size(THREADS)
fn per_thread(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let t = flat_id(wg, nwg) * THREADS + li;
    let o = t % params.outputs;
    let c = t / params.outputs;
    if (c >= params.chunks) {
        return;
    }
    let first = c * params.span;
    let last = min(first + params.span, params.count);
    let base = kept_position(o);
    var mine = start();
    if (STEPPED) {
        // runs along the innermost reduced dim, a step apart in x: a position worked out once a run
        var size = 1u;   // none reduced: one element
        var step = 0u;
        if (params.reduced_ndim > 0u) {
            size = params_reduced_shape(params.reduced_ndim - 1u);
            step = params_reduced_strides(params.reduced_ndim - 1u);
        }
        var k = first;
        while (k < last) {
            let end = min(last, k + size - k % size);
            var at = base + reduced_position(k);
            // STEP_LOADS loads in flight at a time where the run has them (a round, written out by
            // kernels/reduce.py: the loads, then their merges in order), then one at a time
            for (; k + STEP_LOADS <= end; k += STEP_LOADS) {
{{step_round}}
                at += STEP_LOADS * step;
            }
            for (; k < end; k++) {
                mine = merge(mine, Partial(load(at), k), 0u);
                at += step;
            }
        }
    } else {
        for (var k = first; k < last; k++) {
            {{index}}
            mine = merge(mine, Partial(load(base + reduced_position(j)), j), 0u);
        }
    }
    store_epilogue(o * params.chunks + c, result(mine));
}

// One workgroup per output whose elements lie in runs of adjacent ones (kernels/reduce.py's "runs" form:
// a convolution's bias gradient, (N, C, H, W) summed to C): the reduced dims are two, params_reduced_shape(0)
// runs params_reduced_strides(0) apart, each of params_reduced_shape(1) elements; those, the runs' stride
// and x's offset are multiples of 4, and x is bound as vec4s (load4). A GPU then sums few outputs (a bias's
// 16) in one pass, not two: each thread has RUN_LOADS loads of four elements in flight at a time (a round,
// written out by kernels/reduce.py: its loads, then their sums). The threads take `per` runs at a time,
// `lanes` threads a run (a vec4 each): a thread steps from load to load by adds, no division (one per
// element cost as much as its load).
const RUN_LOADS: u32 = {{run_loads}}u;

// A thread's place: its run and its vec4 in that run.
struct Cursor {
    run: u32,
    at: u32,
}

fn next_load(c: Cursor, first: u32, lanes: u32, per: u32, run4: u32) -> Cursor {
    if (c.at + lanes >= run4) {
        return Cursor(c.run + per, first);
    }
    return Cursor(c.run, c.at + lanes);
}

fn merge4(acc: Partial, v: vec4<T>) -> Partial {
    return merge(merge(merge(merge(acc, Partial(v.x, 0u), 0u), Partial(v.y, 0u), 0u), Partial(v.z, 0u), 0u),
                 Partial(v.w, 0u), 0u);
}

@compute @workgroup_size(THREADS)
fn runs(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = flat_id(wg, nwg);
    let live = o < params.outputs;   // the whole workgroup must reach the barriers
    let run4 = params_reduced_shape(1u) / 4u;
    let stride4 = params_reduced_strides(0u) / 4u;
    let base4 = kept_position(o) / 4u;
    let lanes = min(run4, THREADS);
    let per = THREADS / lanes;
    let first = li % lanes;
    var c = Cursor(li / lanes, first);
    var left = 0u;   // this thread's loads: its runs times its vec4s in each
    if (live && li < per * lanes && c.run < params_reduced_shape(0u)) {
        left = (params_reduced_shape(0u) - c.run + per - 1u) / per * ((run4 - first + lanes - 1u) / lanes);
    }
    var mine = start();
    for (; left >= RUN_LOADS; left -= RUN_LOADS) {
{{run_round}}
    }
    for (; left > 0u; left--) {
        mine = merge4(mine, load4(base4 + c.run * stride4 + c.at));
        c = next_load(c, first, lanes, per, run4);
    }
    let merged = workgroup_merge(mine, li, THREADS, 0u);
    if (li == 0u && live) {
        store_epilogue(o, result(merged));
    }
}
