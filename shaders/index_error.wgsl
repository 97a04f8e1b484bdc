// Index errors reported from the device (included by kernels/common.py's fill(..., includes=
// ("index_error",)); py/webgrad/backends/webgpu/index_errors.py is the runtime's side). A kernel
// that meets an index outside its range records the first such index in the runtime's error
// words; the next read of a value fetches them in the same copy and raises an IndexError. The
// including shader declares the words at a binding of its own, bound to runtime.index_errors:
//     @group(0) @binding(N) var<storage, read_write> index_error: IndexErrorRecord;
// and names its op and message by a code from index_errors.code(), filled into its source.
struct IndexErrorRecord {
    flag: atomic<u32>,   // 0 until an error is recorded; the thread that sets it to 1 writes the rest
    code: u32,           // which op and message (index_errors.code)
    index: i32,          // the index as the kernel was given it
    size: u32,           // the size it had to be within
    dim: u32,            // the dim it picked along (0 where the message names none)
}

// Records an error unless one is recorded already (the first one stands until the runtime raises it).
fn report_index_error(code: u32, index: i32, size: u32, dim: u32) {
    loop {
        let first = atomicCompareExchangeWeak(&index_error.flag, 0u, 1u);
        if (first.exchanged) {
            index_error.code = code;
            index_error.index = index;
            index_error.size = size;
            index_error.dim = dim;
            return;
        }
        if (first.old_value != 0u) {
            return;
        }
        // a weak exchange may fail with the flag still 0: try again
    }
}

// `index` into a dim of `size`, a negative one counting from the end: the place it picks; or, for
// one outside [-size, size), the error recorded and place 0, so that the caller reads no further
// than the dim's first element.
fn checked_index(index: i32, size: u32, code: u32, dim: u32) -> u32 {
    let wrapped = select(index, index + i32(size), index < 0);
    if (wrapped < 0 || u32(wrapped) >= size) {
        report_index_error(code, index, size, dim);
        return 0u;
    }
    return u32(wrapped);
}
