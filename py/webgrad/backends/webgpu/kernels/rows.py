"""Rows along one dim of a strided tensor, for the kernel families that work row by row (scan,
sort): the parameter fields that place a row, and their values for a view. The WGSL that reads them
is shaders/rows.wgsl."""
import math

from ...base import contiguous_strides
from .params import u32

# Row r is the r-th combination (row-major) of the dims other than the one worked along; its
# element k lies at in_row(r) + k * in_step in the input and at out_row(r) + k * out_step in the
# output, which is contiguous in the input's shape. The input's offset comes last: it is the word
# that changes from call to call.
ROW_FIELDS = (u32("rows"), u32("length"), u32("in_step"), u32("out_step"), u32("kept_ndim"),
              u32("kept_shape", "kept_ndim"), u32("kept_in_strides", "kept_ndim"),
              u32("kept_out_strides", "kept_ndim"), u32("offset", 1))


def row_layout(x, dim):
    """ROW_FIELDS' values for the rows of View x along dim."""
    kept = [d for d in range(x.ndim) if d != dim]
    out_strides = contiguous_strides(tuple(x.shape))
    return dict(rows=math.prod(x.shape[d] for d in kept), length=x.shape[dim], in_step=x.strides[dim],
                out_step=out_strides[dim], kept_ndim=len(kept), kept_shape=[x.shape[d] for d in kept],
                kept_in_strides=[x.strides[d] for d in kept], kept_out_strides=[out_strides[d] for d in kept],
                offset=[x.offset])
