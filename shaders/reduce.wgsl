// Reduction of a strided input over some of its dims; one workgroup per output element.
// Params: [0] outputs, [1] reduced count, [2] kept ndim K, [3] reduced ndim R, [4] input offset,
// then kept shape (K), kept strides (K), reduced shape (R), reduced strides (R).
// Generated per op: T, the input binding's element type, identity, combine step and the store.
alias T = {{compute}};

@group(0) @binding(1) var<storage, read_write> out: array<{{out_type}}>;
@group(0) @binding(2) var<storage, read> x: array<{{in_type}}>;

const WG: u32 = 64u;
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
        let size = p[5u + d - 1u];
        at += (rest % size) * p[5u + k + d - 1u];
        rest /= size;
    }
    rest = j;
    let base = 5u + 2u * k;
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
    let o = flat_id(wg, nwg);
    let live = o < p[0];   // the whole workgroup must reach the barriers
    var acc = {{identity}};
    var at = 0xffffffffu;
    if (live) {
        for (var j = li; j < p[1]; j += WG) {
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
