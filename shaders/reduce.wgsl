// Reduction of a strided input over some of its dims. Each output's reduced elements are split
// into chunks of at most `span`, one workgroup per (output, chunk): no thread loops long (lavapipe
// silently ends a loop after 65535 iterations) and a large reduction spreads over many workgroups.
// With several chunks the backend reduces the per-chunk results again (backend.reduce).
// Params: [0] outputs, [1] reduced count (the loop's end), [2] kept ndim K, [3] reduced ndim R,
// [4] input offset, [5] chunks per output, [6] span, then kept shape (K), kept strides (K),
// reduced shape (R), reduced strides (R). The result of workgroup (o, c) goes to out[o * chunks + c].
// Generated per op: T, the input binding's element type, identity, combine step, the store, and
// how a loop position k names a reduced index j: k itself, or (arg ops' second pass) the index
// that chunk k picked, read from `picked`, so the value is read again from x.
alias T = {{compute}};

@group(0) @binding(1) var<storage, read_write> out: array<{{out_type}}>;
@group(0) @binding(2) var<storage, read> x: array<{{in_type}}>;
{{picked_binding}}

const WG: u32 = 64u;
const BASE: u32 = 7u;
var<workgroup> vals: array<T, WG>;
var<workgroup> idxs: array<u32, WG>;

fn lowest_T() -> T { return {{lowest}}; }
fn highest_T() -> T { return {{highest}}; }

fn load(at: u32) -> T {
    return {{load}};
}

// Position in x of kept multi-index `o` and reduced multi-index `j`.
fn position(o: u32, j: u32) -> u32 {
    let k = p[2];
    let r = p[3];
    var at = p[4];
    var rest = o;
    for (var d = k; d > 0u; d--) {
        let size = p[BASE + d - 1u];
        at += (rest % size) * p[BASE + k + d - 1u];
        rest /= size;
    }
    rest = j;
    let base = BASE + 2u * k;
    for (var d = r; d > 0u; d--) {
        let size = p[base + d - 1u];
        at += (rest % size) * p[base + r + d - 1u];
        rest /= size;
    }
    return at;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let w = flat_id(wg, nwg);
    let o = w / p[5];
    let live = o < p[0];   // the whole workgroup must reach the barriers
    let first = (w % p[5]) * p[6];
    let last = min(first + p[6], p[1]);
    var acc = {{identity}};
    var at = 0xffffffffu;
    if (live) {
        for (var k = first + li; k < last; k += WG) {
            {{index}}
            let v = load(position(o, j));
            {{combine}}
        }
    }
    vals[li] = acc;
    idxs[li] = at;
    for (var step = WG / 2u; step > 0u; step /= 2u) {
        workgroupBarrier();
        if (li < step) {
            let v = vals[li + step];
            let j = idxs[li + step];
            acc = vals[li];
            at = idxs[li];
            {{combine}}
            vals[li] = acc;
            idxs[li] = at;
        }
    }
    if (li == 0u && live) {
        {{store}}
    }
}

// One thread per output, for short reductions (pooling windows, a few rows): a workgroup per
// output would leave most of its threads idle. Params as for main, with one chunk per output.
@compute @workgroup_size(64)
fn per_thread(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = gid.x + gid.y * nwg.x * 64u;
    if (w >= p[0]) {
        return;
    }
    let o = w;
    var acc = {{identity}};
    var at = 0xffffffffu;
    for (var k = 0u; k < p[1]; k++) {
        {{index}}
        let v = load(position(o, j));
        {{combine}}
    }
    {{store}}
}
