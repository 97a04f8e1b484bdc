"""The attention family (shaders/attention.wgsl): scaled dot-product attention, fused ("flash"
style): one dispatch forward, two backward (dq, then dk and dv)."""
import math

from .... import dtypes
from .common import check_gpu_dtype, fill
from .params import ParamBlock, f32, u32

# shaders/attention.wgsl's rows per workgroup (ROWS, a thread each: each staged tile serves them
# all). Past ATTENTION_MAX_HEAD dims a thread's rows outgrow its registers: the op composes
# attention there.
ATTENTION_ROWS = 64
ATTENTION_MAX_HEAD = 128
WORKGROUP_BYTES = 16384   # WebGPU's default maxComputeWorkgroupStorageSize


# The three kernels' parameters (their meanings: shaders/attention.wgsl).
ATTENTION_PARAMS = ParamBlock(
    u32("batch"), u32("dims"), u32("queries"), u32("keys"), u32("head"), u32("value_head"), f32("scale"),
    u32("mask_kind"), u32("causal"), u32("lse_at"), u32("stats_at"), u32("dv_at"),
    u32("shape", "dims"), u32("q_strides", "dims"), u32("k_strides", "dims"), u32("v_strides", "dims"),
    u32("mask_strides", "dims"), u32("dout_strides", "dims"), u32("offsets", 5))


class AttentionKernels:
    attention_max_head = ATTENTION_MAX_HEAD

    def attention(self, q, k, v, mask, causal, scale):
        check_gpu_dtype(q.dtype, "attention of")
        batch, queries = math.prod(q.shape[:-2]), q.shape[-2]
        numel = batch * queries * v.shape[-1]
        saved = self._empty((numel + batch * queries,), q.dtype)   # out, then lse
        # the entry point shares functions that read dout: q is bound there (and for saved), unread
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), q.storage, q.storage]
        self._attention("forward", [saved, *inputs], q, k, v, mask, None, causal, scale, queries, lse_at=numel)
        return saved

    def attention_backward(self, grad, q, k, v, saved, mask, causal, scale):
        batch, (queries, head), keys = math.prod(q.shape[:-2]), q.shape[-2:], k.shape[-2]
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), grad.storage]
        dq_numel, dk_numel = batch * queries * head, batch * keys * head
        dq = self._empty((dq_numel + 2 * batch * queries,), q.dtype)   # dq, then the rows' (lse, D)
        dkv = self._empty((dk_numel + batch * keys * v.shape[-1],), q.dtype)   # dk, then dv
        offsets = dict(lse_at=batch * queries * v.shape[-1], stats_at=dq_numel, dv_at=dk_numel)
        self._attention("dq", [dq, *inputs, saved], q, k, v, mask, grad, causal, scale, queries, **offsets)
        self._attention("dkv", [dkv, *inputs, dq], q, k, v, mask, grad, causal, scale, keys, **offsets)
        return dq, dkv

    def _attention(self, entry, storages, q, k, v, mask, grad, causal, scale, rows, lse_at=0, stats_at=0, dv_at=0):
        """One dispatch of `entry`, a workgroup per (batch, ROWS rows); q, k, v, mask and grad share
        their leading (batch) dims."""
        batch_shape = q.shape[:-2]
        batch = math.prod(batch_shape)
        if not batch or not rows:
            return
        dims = len(batch_shape) + 2
        no_mask = (0,) * dims
        words = ATTENTION_PARAMS.pack(
            batch=batch, dims=dims, queries=q.shape[-2], keys=k.shape[-2], head=q.shape[-1], value_head=v.shape[-1],
            scale=scale, mask_kind=0 if mask is None else 1 if mask.dtype is dtypes.bool_ else 2,
            causal=int(causal), lse_at=lse_at, stats_at=stats_at, dv_at=dv_at,
            shape=(*batch_shape, q.shape[-2], k.shape[-2]), q_strides=q.strides, k_strides=k.strides,
            v_strides=v.strides, mask_strides=no_mask if mask is None else mask.strides,
            dout_strides=no_mask if grad is None else grad.strides,
            offsets=[t.offset if t is not None else 0 for t in (q, k, v, mask, grad)])
        nq, nv = (-(-size // 4) for size in (q.shape[-1], v.shape[-1]))
        pipeline = self.runtime.pipeline(
            ("attention", entry, nq, nv), lambda: _attention_source(entry, nq, nv),
            entry=entry, bindings=("read_write",) + ("read",) * (len(storages) - 1))
        self.runtime.dispatch(pipeline, storages, words, batch * -(-rows // ATTENTION_ROWS))


def _attention_tile(nq, nv):
    """Rows staged at once: the most (up to 32) whose vec4s and (lse, D) pairs fit WebGPU's 16 KiB."""
    tile = 32
    while tile > 1 and tile * (nq + nv) * 16 + tile * 8 > WORKGROUP_BYTES:
        tile //= 2
    return tile


def _attention_source(entry, nq, nv):
    """shaders/attention.wgsl with the entry point `entry` written out for rows of nq (q, k) and nv
    (v) vec4s, each of a thread's vectors unrolled into named vec4s."""
    Q, V = range(nq), range(nv)

    def dot(name, own, tile, base, n):   # hsum(name) is own . the staged row from `base`
        return ([f"var {name} = {own}0 * {tile}[{base}];"] +
                [f"{name} = fma({own}{i}, {tile}[{base} + {i}u], {name});" for i in range(1, n)])

    def put(name, at, size, n, factor):
        return [f"put4({at}, {size}, {i}u, {name}{i} * {factor});" for i in range(n)]
    head = ["@compute @workgroup_size(ROWS)",
            f"fn {entry}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
            "        @builtin(local_invocation_index) li: u32) {"]
    if entry == "forward":
        body = ["let at = place(wg, nwg, li, params.queries);"]
        body += [f"let q{i} = own4(at, 0u, {i}u);" for i in Q] + [f"var a{i} = vec4<f32>();" for i in V]
        body += ["var top = 0.0;     // the largest score so far (where total > 0)",
                 "var total = 0.0;   // the sum of exp(score - top)",
                 "let end = keys_end(block(wg, nwg, params.queries).y);",
                 "for (var start = 0u; start < end; start += TILE) {",
                 "    load_tiles(at, li, start, params.keys, true);",
                 "    workgroupBarrier();",
                 "    for (var j = 0u; j < TILE; j++) {",
                 "        let e = j * NQ;"]
        body += ["        " + line for line in dot("d", "q", "tile_e", "e", nq)]
        body += ["        let s = score(at, at.row, start + j, hsum(d));",
                 "        if (!is_masked(s)) {",
                 "            if (total == 0.0 || s > top) {",
                 "                let rescale = select(0.0, exp(top - s), total > 0.0);",
                 "                total *= rescale;"]
        body += [f"                a{i} *= rescale;" for i in V]
        body += ["                top = s;",
                 "            }",
                 "            let p = exp(s - top);",
                 "            total += p;",
                 "            let w = j * NV;"]
        body += [f"            a{i} = fma(vec4(p), tile_v[w + {i}u], a{i});" for i in V]
        body += ["        }", "    }",
                 "    workgroupBarrier();   // the tiles are read before the next are staged", "}",
                 "if (at.live) {",
                 "    let row = at.batch * params.queries + at.row;",
                 "    let inverse = select(0.0, 1.0 / total, total > 0.0);"]
        body += ["    " + line for line in put("a", "row * params.value_head", "params.value_head", nv, "inverse")]
        body += ["    out[params.lse_at + row] = select(f32_from_bits(MASKED), top + log(total), total > 0.0);", "}"]
    elif entry == "dq":
        body = ["let at = place(wg, nwg, li, params.queries);",
                "let row = at.batch * params.queries + at.row;"]
        body += [f"let q{i} = own4(at, 0u, {i}u);" for i in Q] + [f"let g{i} = own4(at, 3u, {i}u);" for i in V]
        body += ["var dd = vec4<f32>();"]
        body += [f"dd = fma(g{i}, saved4(at.live, row * params.value_head, params.value_head, {i}u), dd);" for i in V]
        body += ["let delta = hsum(dd);",
                 "let lse = select(0.0, saved[params.lse_at + row], at.live);",
                 "if (at.live) {",
                 "    out[params.stats_at + 2u * row] = lse;",
                 "    out[params.stats_at + 2u * row + 1u] = delta;",
                 "}"]
        body += [f"var a{i} = vec4<f32>();" for i in Q]
        body += ["let end = keys_end(block(wg, nwg, params.queries).y);",
                 "for (var start = 0u; start < end; start += TILE) {",
                 "    load_tiles(at, li, start, params.keys, true);",
                 "    workgroupBarrier();",
                 "    for (var j = 0u; j < TILE; j++) {",
                 "        let e = j * NQ;",
                 "        let w = j * NV;"]
        body += ["        " + line for line in dot("d", "q", "tile_e", "e", nq)]
        body += ["        let s = score(at, at.row, start + j, hsum(d));",
                 "        if (!is_masked(s)) {"]
        body += ["            " + line for line in dot("dp", "g", "tile_v", "w", nv)]
        body += ["            let ds = exp(s - lse) * (hsum(dp) - delta);"]
        body += [f"            a{i} = fma(vec4(ds), tile_e[e + {i}u], a{i});" for i in Q]
        body += ["        }", "    }", "    workgroupBarrier();", "}",
                 "if (at.live) {"]
        body += ["    " + line for line in put("a", "row * params.head", "params.head", nq, "params.scale")]
        body += ["}"]
    else:
        body = ["let at = place(wg, nwg, li, params.keys);"]
        body += [f"let k{i} = own4(at, 1u, {i}u);" for i in Q] + [f"let v{i} = own4(at, 2u, {i}u);" for i in V]
        body += [f"var dk{i} = vec4<f32>();" for i in Q] + [f"var dv{i} = vec4<f32>();" for i in V]
        body += ["// causal: the queries before the workgroup's first key attend none of its keys",
                 "let begin = select(0u, block(wg, nwg, params.keys).y, params.causal == 1u);",
                 "for (var start = begin; start < params.queries; start += TILE) {",
                 "    load_tiles(at, li, start, params.queries, false);",
                 "    for (var i = li; i < TILE; i += ROWS) {   // (0 past the last query: p is 0 there)",
                 "        let query = at.batch * params.queries + start + i;",
                 "        let live = start + i < params.queries;",
                 "        let stats = vec2<f32>(saved[params.stats_at + 2u * query],",
                 "                              saved[params.stats_at + 2u * query + 1u]);",
                 "        tile_stats[i] = select(vec2<f32>(0.0), stats, live);",
                 "    }",
                 "    workgroupBarrier();",
                 "    for (var j = 0u; j < TILE; j++) {",
                 "        let e = j * NQ;",
                 "        let w = j * NV;"]
        body += ["        " + line for line in dot("d", "k", "tile_e", "e", nq)]
        body += ["        let s = score(at, start + j, at.row, hsum(d));",
                 "        if (!is_masked(s)) {",
                 "            let stats = tile_stats[j];",
                 "            let p = exp(s - stats.x);"]
        body += ["            " + line for line in dot("dp", "v", "tile_v", "w", nv)]
        body += ["            let ds = p * (hsum(dp) - stats.y);"]
        body += [f"            dv{i} = fma(vec4(p), tile_v[w + {i}u], dv{i});" for i in V]
        body += [f"            dk{i} = fma(vec4(ds), tile_e[e + {i}u], dk{i});" for i in Q]
        body += ["        }", "    }", "    workgroupBarrier();", "}",
                 "if (at.live) {",
                 "    let row = at.batch * params.keys + at.row;"]
        body += ["    " + line for line in put("dk", "row * params.head", "params.head", nq, "params.scale")]
        dv = put("dv", "params.dv_at + row * params.value_head", "params.value_head", nv, "1.0")
        body += ["    " + line for line in dv]
        body += ["}"]
    entries = "\n".join(head + ["    " + line for line in body] + ["}"])
    return fill("attention", ATTENTION_PARAMS, rows=str(ATTENTION_ROWS), tile=str(_attention_tile(nq, nv)),
                nq=str(nq), nv=str(nv), entries=entries)


def _mask_storage(q, mask):
    """The mask's binding: its storage, or q's where there is none (bound, never read)."""
    return q.storage if mask is None else mask.storage
