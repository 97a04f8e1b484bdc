"""The sort family (shaders/sort.wgsl): a stable argsort along one dim by a bitonic network, in
workgroup memory for rows of up to SORT_LOCAL elements, else in global scratch, one dispatch per
stage of the network."""
from .... import dtypes
from .common import check_gpu_dtype, fill, groups
from .params import ParamBlock, u32
from .rows import ROW_FIELDS, row_layout

# The longest row (padded to a power of two) one workgroup sorts in its memory: a key and an index
# each, 8 KiB of the 16 KiB WebGPU guarantees.
SORT_LOCAL = 1024
SORT_PARAMS = ParamBlock(u32("padded"), u32("descending"), u32("k"), u32("j"), *ROW_FIELDS)


class SortKernels:
    def argsort(self, x, dim, descending=False):
        """int32 indices that sort View x (float32 or int32) along dim, stably; contiguous in x's shape."""
        check_gpu_dtype(x.dtype, "sorting")
        out = self._empty(x.shape, dtypes.int32)
        layout = row_layout(x, dim)
        rows, length = layout["rows"], layout["length"]
        if not rows or not length:
            return out
        padded = 1 << max(0, length - 1).bit_length()
        words = dict(padded=padded, descending=int(descending), **layout)

        def run(entry, storages, count, k=0, j=0):
            pipeline = self.runtime.pipeline(
                ("sort", entry, x.dtype.name),
                lambda: fill("sort", SORT_PARAMS, includes=("rows",), type=x.dtype.wgsl, local=str(SORT_LOCAL)),
                entry=entry, bindings=("read_write", "read", "read_write", "read_write")[:len(storages)])
            self.runtime.dispatch(pipeline, storages, SORT_PARAMS.pack(k=k, j=j, **words), count)

        if padded <= SORT_LOCAL:
            run("local", [out, x.storage], rows)
            return out
        scratch = [out, x.storage, self._empty((rows, padded), x.dtype), self._empty((rows, padded), dtypes.int32)]
        run("init", scratch, groups(rows * padded))
        k = 2
        while k <= padded:
            j = k // 2
            while j:
                run("step", scratch, groups(rows * padded // 2), k, j)
                j //= 2
            k *= 2
        run("finish", scratch, groups(rows * length))
        return out
