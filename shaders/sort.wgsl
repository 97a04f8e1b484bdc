// argsort along one dim: each row's indices in sorted order (ascending, or descending when
// `descending` is 1), stable: equal keys keep their order, since every comparison breaks ties by
// index. NaN sorts above every number, as in PyTorch. A bitonic network over the row padded to
// `padded` (a power of two) elements; the padding (indices >= length) sorts after everything.
// Parameters: kernels/sort.py's SORT_PARAMS (rows.wgsl's row layout, padded, descending, and the
// network stage k, j of a global step). out: int32 indices, contiguous in x's shape.
// local: one workgroup sorts one row in workgroup memory (padded <= LOCAL): the whole network in
//        one dispatch.
// Longer rows sort in global scratch (keys, idx: `padded` per row): init fills it, each step
// dispatch is one stage (k, j) of the network, finish writes the indices out.
alias T = {{type}};

@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read_write> keys: array<T>;
@group(0) @binding(4) var<storage, read_write> idx: array<u32>;

const LOCAL: u32 = {{local}}u;   // kernels/sort.py's SORT_LOCAL
var<workgroup> local_keys: array<T, LOCAL>;
var<workgroup> local_idx: array<u32, LOCAL>;

fn is_nan(v: T) -> bool {
    // by the bits (compilers may assume v == v); never for integer T
    return T(0.5) != T(0) && (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Whether (key a, index ia) sorts before (key b, index ib).
fn before(a: T, ia: u32, b: T, ib: u32) -> bool {
    if (ia >= params.length || ib >= params.length) {
        return ia < ib;   // padding last
    }
    let descending = params.descending == 1u;
    let a_nan = is_nan(a);
    let b_nan = is_nan(b);
    if (a_nan != b_nan) {
        return b_nan != descending;
    }
    if (a_nan || a == b) {
        return ia < ib;
    }
    return (a < b) != descending;
}

// Pair t of a network stage (k, j): positions i and i + j, and whether i's block sorts upwards.
fn pair(t: u32, k: u32, j: u32) -> vec3<u32> {
    let i = 2u * j * (t / j) + t % j;
    return vec3<u32>(i, i + j, select(0u, 1u, (i & k) == 0u));
}

fn load(start: u32, p: u32) -> T {
    return x[start + p * params.in_step];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn local(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let live = r < params.rows;   // the whole workgroup reaches the barriers
    let start = row_starts(min(r, params.rows - 1u));
    for (var p = li; p < params.padded; p += WORKGROUP_SIZE) {
        local_idx[p] = p;
        local_keys[p] = select(T(0), load(start.x, min(p, params.length - 1u)), live && p < params.length);
    }
    for (var k = 2u; k <= params.padded; k *= 2u) {
        for (var j = k / 2u; j > 0u; j /= 2u) {
            workgroupBarrier();
            for (var t = li; t < params.padded / 2u; t += WORKGROUP_SIZE) {
                let at = pair(t, k, j);
                let a = local_keys[at.x];
                let ia = local_idx[at.x];
                let b = local_keys[at.y];
                let ib = local_idx[at.y];
                if (select(before(a, ia, b, ib), before(b, ib, a, ia), at.z == 1u)) {
                    local_keys[at.x] = b;
                    local_idx[at.x] = ib;
                    local_keys[at.y] = a;
                    local_idx[at.y] = ia;
                }
            }
        }
    }
    workgroupBarrier();
    if (live) {
        for (var p = li; p < params.length; p += WORKGROUP_SIZE) {
            out[start.y + p * params.out_step] = i32(local_idx[p]);
        }
    }
}

// One thread per scratch element: row r's padded elements at r * padded.
@compute @workgroup_size(WORKGROUP_SIZE)
fn init(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let e = element_id(wg, nwg, li);
    if (e >= params.rows * params.padded) { return; }
    let p = e % params.padded;
    idx[e] = p;
    keys[e] = T(0);
    if (p < params.length) {
        keys[e] = load(row_starts(e / params.padded).x, p);
    }
}

// One thread per pair of one stage (k, j) of the network, over every row.
@compute @workgroup_size(WORKGROUP_SIZE)
fn step(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let t = element_id(wg, nwg, li);
    let half = params.padded / 2u;
    if (t >= params.rows * half) { return; }
    let base = (t / half) * params.padded;
    let at = pair(t % half, params.k, params.j) + vec3<u32>(base, base, 0u);
    let a = keys[at.x];
    let ia = idx[at.x];
    let b = keys[at.y];
    let ib = idx[at.y];
    if (select(before(a, ia, b, ib), before(b, ib, a, ia), at.z == 1u)) {
        keys[at.x] = b;
        idx[at.x] = ib;
        keys[at.y] = a;
        idx[at.y] = ia;
    }
}

// One thread per output element.
@compute @workgroup_size(WORKGROUP_SIZE)
fn finish(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let e = element_id(wg, nwg, li);
    if (e >= params.rows * params.length) { return; }
    let r = e / params.length;
    let p = e % params.length;
    out[row_starts(r).y + p * params.out_step] = i32(idx[r * params.padded + p]);
}
