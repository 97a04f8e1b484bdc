// Layer and RMS normalisation over the rows of an (R, C) input, fused each way.
// forward: one workgroup per row. Its threads sum the row (the mean; 0 when not `centered`, RMS
//          norm), then the squares of x - mean (two passes over the row, not sum x^2 - mean^2,
//          which cancels); rstd = 1 / sqrt(var + eps); y = (x - mean) * rstd * weight + bias.
//          The row's (mean, rstd) are kept in `stats` for the backward.
// backward_input: one workgroup per row. With xhat = (x - mean) * rstd and g = dy * weight,
//          dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (mean(g) only when centered).
// backward_params: the columns' sums over rows of (dy * xhat, dy), d weight and d bias: a
//          workgroup per (block of COLS columns, chunk of CHUNK_ROWS rows), LANES threads per column
//          taking every LANES-th row of the chunk. Chunk k writes out[k, 0, c] and out[k, 1, c];
//          the backend sums the chunks where there are several. No atomics: deterministic.
// Parameters (kernels/norm.py's NORM_PARAMS): `rows` R and `cols` C; x's element (r, c) at
// starts(0) + r * x_strides(0) + c * x_strides(1), dy's likewise through starts(1) and
// dy_strides; `affine`: bit 0 set with a weight, bit 1 with a bias (contiguous (C,), at starts(2)
// and starts(3)); `centered`: 1 for layer norm; `eps`. y and dx are contiguous (R, C), stats (R, 2).
// Every entry stores its out through store_epilogue (kernels/epilogue.py: under wg.jit the maps
// after y or dx, a residual gradient's add, run there).
// out: y, dx, or the chunks' sums; stats: written forward, read backward; x; dy (forward: x again,
// unread); weight and bias (where absent: x again, unread); then an epilogue's buffers (kernels/norm.py)
{{bindings}}
{{epilogue}}

const ROW_THREADS: u32 = {{row_threads}}u;  // forward's and backward_input's workgroup, for one row
const COLS: u32 = {{cols}}u;                // backward_params: columns per workgroup (kernels/norm.py's NORM_COLS),
const LANES: u32 = WORKGROUP_SIZE / COLS;   // threads per column,
const CHUNK_ROWS: u32 = {{chunk_rows}}u;    // and rows per workgroup (NORM_CHUNK_ROWS)

// Threads sum pairs of f32 together (shaders/workgroup.wgsl).
alias Partial = vec2<f32>;
const PARTIALS: u32 = WORKGROUP_SIZE;

fn merge(a: Partial, b: Partial, how: u32) -> Partial {
    return a + b;
}

fn x_at(r: u32, c: u32) -> f32 {
    return x[params_starts(0u) + r * params_x_strides(0u) + c * params_x_strides(1u)];
}

fn dy_at(r: u32, c: u32) -> f32 {
    return dy[params_starts(1u) + r * params_dy_strides(0u) + c * params_dy_strides(1u)];
}

fn weight_at(c: u32) -> f32 {
    return select(1.0, weight[params_starts(2u) + c], (params.affine & 1u) != 0u);
}

// The forward's row r's (mean, rstd), kept for the backward by its first thread (cols 0: no row).
fn keep_stats(r: u32, li: u32, cols: u32, mean: f32, rstd: f32) {
    if (cols > 0u && li == 0u) {
        stats[2u * r] = mean;
        stats[2u * r + 1u] = rstd;
    }
}

// What keep_stats kept for row r; 0 past the rows.
fn row_stats(r: u32) -> vec2<f32> {
    let at = 2u * min(r, params.rows - 1u);
    return select(vec2(0.0), vec2(stats[at], stats[at + 1u]), r < params.rows);
}

@compute @workgroup_size(ROW_THREADS)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let cols = select(0u, params.cols, r < params.rows);   // the whole workgroup must reach the barriers
    let count = f32(params.cols);
    var mean = 0.0;
    if (params.centered == 1u) {
        var sum = 0.0;
        for (var c = li; c < cols; c += ROW_THREADS) {
            sum += x_at(r, c);
        }
        mean = workgroup_merge_all(Partial(sum, 0.0), li, ROW_THREADS, 0u).x / count;
    }
    var squares = 0.0;
    for (var c = li; c < cols; c += ROW_THREADS) {
        let centred = x_at(r, c) - mean;
        squares += centred * centred;
    }
    let rstd = inverseSqrt(workgroup_merge_all(Partial(squares, 0.0), li, ROW_THREADS, 0u).x / count + params.eps);
    for (var c = li; c < cols; c += ROW_THREADS) {
        var y = (x_at(r, c) - mean) * rstd * weight_at(c);
        if ((params.affine & 2u) != 0u) {
            y += bias[params_starts(3u) + c];
        }
        store_epilogue(r * params.cols + c, y);
    }
    keep_stats(r, li, cols, mean, rstd);
}

@compute @workgroup_size(ROW_THREADS)
fn backward_input(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let cols = select(0u, params.cols, r < params.rows);   // the whole workgroup must reach the barriers
    let kept = row_stats(r);
    let mean = kept.x;
    let rstd = kept.y;
    var sums = Partial(0.0, 0.0);   // (sum g, sum g * xhat)
    for (var c = li; c < cols; c += ROW_THREADS) {
        let g = dy_at(r, c) * weight_at(c);
        sums += Partial(g, g * (x_at(r, c) - mean) * rstd);
    }
    let means = workgroup_merge_all(sums, li, ROW_THREADS, 0u) / f32(params.cols);
    let shift = select(0.0, means.x, params.centered == 1u);
    for (var c = li; c < cols; c += ROW_THREADS) {
        let g = dy_at(r, c) * weight_at(c);
        store_epilogue(r * params.cols + c, rstd * (g - shift - (x_at(r, c) - mean) * rstd * means.y));
    }
}

// forward_held and backward_input_held: forward's and backward_input's short rows (a GPU's: kernels/norm.py's
// NORM_HELD values a thread at most), each thread's values loaded once, all together, into named registers
// (written out per count by kernels/norm.py's _held_slots: x{i}, g{i} at column c{i}, summed in the
// loops' order, so the same bits). The loops above load one value at a time, since their trip count is
// the row's, and walk the row three times (an H100: 47 us a forward of 16384 x 384 rows, ~1 TB/s).

// x's value (or dy's, from_dy) at column c of row r, 0 past the row's end (and past the rows).
fn held(r: u32, c: u32, cols: u32, from_dy: bool) -> f32 {
    let rr = min(r, params.rows - 1u);
    let cc = min(c, params.cols - 1u);
    return select(0.0, select(x_at(rr, cc), dy_at(rr, cc), from_dy), c < cols);
}

@compute @workgroup_size(ROW_THREADS)
fn forward_held(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let cols = select(0u, params.cols, r < params.rows);
    let count = f32(params.cols);
{{held_x}}
    var mean = 0.0;
    if (params.centered == 1u) {
        mean = workgroup_merge_all(Partial({{sum_x}}, 0.0), li, ROW_THREADS, 0u).x / count;
    }
    var squares = 0.0;
{{held_squares}}
    let rstd = inverseSqrt(workgroup_merge_all(Partial(squares, 0.0), li, ROW_THREADS, 0u).x / count + params.eps);
{{held_y}}
    keep_stats(r, li, cols, mean, rstd);
}

@compute @workgroup_size(ROW_THREADS)
fn backward_input_held(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let cols = select(0u, params.cols, r < params.rows);   // the whole workgroup must reach the barriers
    let kept = row_stats(r);
    let mean = kept.x;
    let rstd = kept.y;
    var sums = Partial(0.0, 0.0);   // (sum g, sum g * xhat)
{{held_g}}
    let means = workgroup_merge_all(sums, li, ROW_THREADS, 0u) / f32(params.cols);
    let shift = select(0.0, means.x, params.centered == 1u);
{{held_dx}}
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward_params(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let c = wg.x * COLS + li % COLS;
    let lane = li / COLS;
    let start = wg.y * CHUNK_ROWS;
    let end = min(start + CHUNK_ROWS, params.rows);
    var sums = Partial(0.0, 0.0);   // (sum dy * xhat, sum dy)
    if (c < params.cols) {
        var r = start + lane;
        // four rows' loads in flight at a time, then their terms summed in the rows' order (one row at
        // a time, an H100 read 16384 x 384 of x and dy at ~1.6 TB/s)
        for (; r + 3u * LANES < end; r += 4u * LANES) {
            let g0 = dy_at(r, c);
            let g1 = dy_at(r + LANES, c);
            let g2 = dy_at(r + 2u * LANES, c);
            let g3 = dy_at(r + 3u * LANES, c);
            let x0 = x_at(r, c);
            let x1 = x_at(r + LANES, c);
            let x2 = x_at(r + 2u * LANES, c);
            let x3 = x_at(r + 3u * LANES, c);
            let s0 = vec2(stats[2u * r], stats[2u * r + 1u]);
            let s1 = vec2(stats[2u * (r + LANES)], stats[2u * (r + LANES) + 1u]);
            let s2 = vec2(stats[2u * (r + 2u * LANES)], stats[2u * (r + 2u * LANES) + 1u]);
            let s3 = vec2(stats[2u * (r + 3u * LANES)], stats[2u * (r + 3u * LANES) + 1u]);
            sums += Partial(g0 * (x0 - s0.x) * s0.y, g0);
            sums += Partial(g1 * (x1 - s1.x) * s1.y, g1);
            sums += Partial(g2 * (x2 - s2.x) * s2.y, g2);
            sums += Partial(g3 * (x3 - s3.x) * s3.y, g3);
        }
        for (; r < end; r += LANES) {
            let g = dy_at(r, c);
            sums += Partial(g * (x_at(r, c) - stats[2u * r]) * stats[2u * r + 1u], g);
        }
    }
    partials[li] = sums;
    workgroupBarrier();
    if (lane == 0u && c < params.cols) {
        for (var l = 1u; l < LANES; l++) {
            sums += partials[l * COLS + li];
        }
        store_epilogue(wg.y * 2u * params.cols + c, sums.x);
        store_epilogue((wg.y * 2u + 1u) * params.cols + c, sums.y);
    }
}
