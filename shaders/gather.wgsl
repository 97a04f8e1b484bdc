// gather: out[pos] = src[pos with pos[dim] := index[pos]], out having the index's shape.
// scatter_add: gather's adjoint, out (the gathered tensor's shape) collects src (the gradient) at
// the gathered positions; each output sums over the index's dim itself, so no atomics are needed.
// Parameters (kernels/gather.py's GATHER_PARAMS): out has `numel` elements of `shape` (`ndim`
// dims); out's element at coordinates pos reads src and the index at `offsets` (src's, then the
// index's) plus pos through `src_strides` and `index_strides`. `index_shape` is the index's shape
// (gather's is out's; scatter_add's piece of it, the index along dim being summed in pieces).
// Indices pick along `dim`, in [-`dim_size`, `dim_size`): negative ones count from the end. One
// out of range is reported (shaders/index_error.wgsl: the runtime raises it at the next read);
// gather reads the dim's first element for it, scatter_add adds it nowhere. scatter_add adds to
// out's values where `accumulate` is 1 (the pieces after the first).
// out is contiguous from its buffer's start. A thread computes one element of it; but a uint8 out
// (PACKED: bytes four to a u32 word, which one thread must write whole) takes a thread per word.
alias T = {{type}};
const PACKED: bool = {{packed}};
const GATHER_ERROR: u32 = {{gather_error}}u;     // kernels/gather.py's codes for index_errors
const SCATTER_ERROR: u32 = {{scatter_error}}u;

@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> src: array<T>;
@group(0) @binding(3) var<storage, read> index: array<i32>;
@group(0) @binding(4) var<storage, read_write> index_error: IndexErrorRecord;

// Out's element i: its coordinate along dim, where src and the index hold its coordinates but
// that one, and whether those lie inside the index's shape.
struct Place {
    along: u32,
    src_at: u32,
    index_at: u32,
    inside: bool,
}

fn place(i: u32) -> Place {
    var at = Place(0u, params_offsets(0u), params_offsets(1u), true);
    var rest = i;
    for (var d = params.ndim; d > 0u; d--) {
        let size = params_shape(d - 1u);
        let pos = rest % size;
        rest /= size;
        if (d - 1u == params.dim) {
            at.along = pos;
        } else {
            at.inside = at.inside && pos < params_index_shape(d - 1u);
            at.src_at += pos * params_src_strides(d - 1u);
            at.index_at += pos * params_index_strides(d - 1u);
        }
    }
    return at;
}

// src's element at position at, and out's element i (uint8: a byte of a word), as T.
fn src_element(at: u32) -> T {
    return {{src_element}};
}

fn out_element(i: u32) -> T {
    return {{out_element}};
}

// Out's element i as gather gives it.
fn gathered(i: u32) -> T {
    let at = place(i);
    let picked = checked_index(index[at.index_at + at.along * params_index_strides(params.dim)], params.dim_size,
                               GATHER_ERROR, params.dim);
    return src_element(at.src_at + picked * params_src_strides(params.dim));
}

// Out's element i as scatter_add gives it.
fn scattered(i: u32) -> T {
    let at = place(i);
    var acc = T(0);
    if (at.inside) {
        let span = params_index_shape(params.dim);
        let index_step = params_index_strides(params.dim);
        let src_step = params_src_strides(params.dim);
        let size = i32(params.dim_size);
        for (var k = 0u; k < span; k++) {
            let picked = index[at.index_at + k * index_step];
            let wrapped = select(picked, picked + size, picked < 0);
            if (wrapped == i32(at.along)) {
                acc += src_element(at.src_at + k * src_step);
            } else if (at.along == 0u && (wrapped < 0 || wrapped >= size)) {
                // each index is seen by every output along dim: the first output reports it
                report_index_error(SCATTER_ERROR, picked, params.dim_size, params.dim);
            }
        }
    }
    if (params.accumulate == 1u) {
        acc += out_element(i);
    }
    return acc;
}

fn element(i: u32, scatter: bool) -> T {
    if (scatter) {
        return scattered(i);
    }
    return gathered(i);
}

// Thread t's share of out: element t, or where PACKED the word of elements 4t .. 4t + 3 (the bytes
// past the last element written 0).
fn put(t: u32, scatter: bool) {
    if (!PACKED) {
        if (t < params.numel) {
            out[t] = element(t, scatter);
        }
        return;
    }
    if (t * 4u >= params.numel) {
        return;
    }
    var word = 0u;
    for (var k = 0u; k < 4u && t * 4u + k < params.numel; k++) {
        word |= byte_in_word(u32(element(t * 4u + k, scatter)), k);
    }
    out[t] = bitcast<T>(word);   // (T is u32 where PACKED)
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn gather(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    put(element_id(wg, nwg, li), false);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn scatter_add(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    put(element_id(wg, nwg, li), true);
}
