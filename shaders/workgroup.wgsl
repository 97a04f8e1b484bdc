// Tree reduction over workgroup memory, for the kernels whose threads reduce together (included by
// kernels/common.py's fill(..., includes=("workgroup",))). The including shader declares what is
// reduced and how:
//     alias Partial = ...;                                    what each thread holds
//     const PARTIALS: u32 = ...;                              the most threads that reduce together
//     fn merge(a: Partial, b: Partial, how: u32) -> Partial   a's threads come before b's
// `how` is passed through from the call, for a shader that merges more than one way (the loss: a
// max, then a sum); a shader with one way ignores it.
var<workgroup> partials: array<Partial, PARTIALS>;

// `mine` merged over the workgroup's `threads` threads (a power of two, at most PARTIALS), lowest
// thread first: whole in thread 0, a part of it in the others. Every thread calls it (barriers).
fn workgroup_merge(mine: Partial, li: u32, threads: u32, how: u32) -> Partial {
    var merged = mine;
    partials[li] = merged;
    for (var step = threads / 2u; step > 0u; step /= 2u) {
        workgroupBarrier();
        if (li < step) {
            merged = merge(merged, partials[li + step], how);
            partials[li] = merged;
        }
    }
    return merged;
}

// workgroup_merge's whole result, in every thread.
fn workgroup_merge_all(mine: Partial, li: u32, threads: u32, how: u32) -> Partial {
    _ = workgroup_merge(mine, li, threads, how);
    workgroupBarrier();
    let merged = partials[0];
    workgroupBarrier();   // every thread has read it before partials is written again
    return merged;
}
