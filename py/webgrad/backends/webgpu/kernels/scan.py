"""The scan family (shaders/scan.wgsl): inclusive running sums along one dim."""
from .common import check_gpu_dtype, fill, groups
from .params import ParamBlock, u32
from .rows import ROW_FIELDS, row_layout

SCAN_PARAMS = ParamBlock(u32("reverse"), *ROW_FIELDS)
# Rows this short take one thread each (scan.wgsl per_thread) rather than a workgroup.
PER_THREAD_SCAN = 64


class ScanKernels:
    def cumsum(self, x, dim, reverse=False):
        """x's running sums along dim (from the end when reverse), contiguous in x's shape; float32 or int32."""
        check_gpu_dtype(x.dtype, "cumsum of")
        storage = self._empty(x.shape, x.dtype)
        layout = row_layout(x, dim)
        if not layout["rows"] or not layout["length"]:
            return storage
        per_thread = layout["length"] <= PER_THREAD_SCAN
        entry = "per_thread" if per_thread else "main"
        pipeline = self.runtime.pipeline(("scan", entry, x.dtype.name),
                                         lambda: fill("scan", SCAN_PARAMS, includes=("rows",), type=x.dtype.wgsl),
                                         entry=entry, bindings=("read_write", "read"))
        self.runtime.dispatch(pipeline, [storage, x.storage], SCAN_PARAMS.pack(reverse=int(reverse), **layout),
                              groups(layout["rows"]) if per_thread else layout["rows"])
        return storage
