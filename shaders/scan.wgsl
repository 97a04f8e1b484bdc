// Inclusive running sum (cumsum) along one dim of a strided input, forward or (reverse == 1, for
// cumsum's gradient) from the row's end. Parameters: kernels/scan.py's SCAN_PARAMS (rows.wgsl's row
// layout and `reverse`). out is contiguous in x's shape.
// main: one workgroup per row; the row is taken WORKGROUP_SIZE elements at a time, each piece
//       scanned in workgroup memory (Hillis-Steele) and added to the running total of the pieces
//       before it, so no thread loops longer than length / WORKGROUP_SIZE.
// per_thread: one thread per row, for short rows (a workgroup would idle most of its threads).
alias T = {{type}};

@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;

var<workgroup> sums: array<T, WORKGROUP_SIZE>;

// The k-th element of a row in scan order.
fn along(k: u32) -> u32 {
    return select(k, params.length - 1u - k, params.reverse == 1u);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let r = flat_id(wg, nwg);
    let live = r < params.rows;   // the whole workgroup reaches the barriers
    let start = row_starts(min(r, params.rows - 1u));
    var carry = T(0);
    for (var first = 0u; first < params.length; first += WORKGROUP_SIZE) {
        let k = first + li;
        let inside = live && k < params.length;
        var v = T(0);
        if (inside) {
            v = x[start.x + along(k) * params.in_step];
        }
        sums[li] = v;
        for (var step = 1u; step < WORKGROUP_SIZE; step *= 2u) {
            workgroupBarrier();
            let add = select(T(0), sums[select(0u, li - step, li >= step)], li >= step);
            workgroupBarrier();
            v += add;
            sums[li] = v;
        }
        workgroupBarrier();
        if (inside) {
            out[start.y + along(k) * params.out_step] = carry + v;
        }
        carry += sums[WORKGROUP_SIZE - 1u];
        workgroupBarrier();   // every thread has read the piece's total before the next piece
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn per_thread(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let r = element_id(wg, nwg, li);
    if (r >= params.rows) { return; }
    let start = row_starts(r);
    var total = T(0);
    for (var k = 0u; k < params.length; k++) {
        total += x[start.x + along(k) * params.in_step];
        out[start.y + along(k) * params.out_step] = total;
    }
}
