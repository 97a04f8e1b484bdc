"""A kernel's parameter block (kernels/params.py's ParamBlock) and how a family's source is put
together (kernels/common.py's fill): the WGSL that reads the fields and the words packed for them
come from one declaration, so they agree whatever its order; bad words are refused by name."""
import struct

import numpy as np
import pytest

import webgrad as wg
from webgrad import dtypes
from webgrad.backends.webgpu.kernels import common
from webgrad.backends.webgpu.kernels.params import ParamBlock, f32, i32, u32
from conftest import rng, tag

# Fields of every kind: scalars of the three types, arrays of fixed length and of a length that a
# scalar field holds.
_FIELDS = (u32("count"), i32("shift"), f32("scale"), u32("sizes", "count"), i32("steps", 3), f32("weights", 2))


def _random_values():
    r = rng()
    count = int(r.integers(1, 6))
    return {"count": count, "shift": int(r.integers(-2 ** 31, 2 ** 31)),
            "scale": float(np.float32(r.standard_normal())), "sizes": r.integers(0, 2 ** 32, count).tolist(),
            "steps": r.integers(-2 ** 31, 2 ** 31, 3).tolist(), "weights": np.float32(r.standard_normal(2)).tolist()}


def _bits(values):
    """The u32 bit patterns of every field's values, in _FIELDS's order (the order the kernel below
    writes them in, whatever order the block declares them in)."""
    bits = []
    for field in _FIELDS:
        value = values[field.name]
        items = [value] if field.length is None else value
        fmt = {"u32": "<I", "i32": "<i", "f32": "<f"}[field.type]
        bits += [struct.unpack("<I", struct.pack(fmt, v))[0] for v in items]
    return bits


# Reads each field by name and writes its bits to out, in _FIELDS's order.
_READ_BY_NAME = """
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn main() {
    out[0] = params.count;
    out[1] = bitcast<u32>(params.shift);
    out[2] = bitcast<u32>(params.scale);
    var at = 3u;
    for (var i = 0u; i < params.count; i++) {
        out[at] = params_sizes(i);
        at++;
    }
    for (var i = 0u; i < 3u; i++) {
        out[at] = bitcast<u32>(params_steps(i));
        at++;
    }
    for (var i = 0u; i < 2u; i++) {
        out[at] = bitcast<u32>(params_weights(i));
        at++;
    }
}
"""


def _run_by_name(block, values):
    """What the kernel reading `block`'s fields by name finds in the words block.pack() gives."""
    runtime = wg.get_backend("webgpu").runtime
    key = ("test_kernel_params", tuple(f.name for f in block.fields))
    pipeline = runtime.pipeline(key, lambda: block.wgsl() + _READ_BY_NAME, bindings=("read_write",))
    n = len(_bits(values))
    out = wg.get_backend("webgpu").empty(n, dtypes.int32)
    runtime.dispatch(pipeline, [out], block.pack(**values), 1)
    return list(struct.unpack(f"<{n}I", runtime.read(out, 0, 4 * n)))


def test_reordered_fields_change_the_wgsl_and_the_packing_together():
    values = _random_values()
    declared, reordered = ParamBlock(*_FIELDS), ParamBlock(*reversed(_FIELDS))
    assert declared.wgsl() != reordered.wgsl(), tag("the order of the fields is the order in the WGSL")
    assert declared.pack(**values) != reordered.pack(**values), tag("the order of the fields is the order of the words")
    for block in (declared, reordered):
        assert _run_by_name(block, values) == _bits(values), tag(f"{block} read by name")


def test_pack_refuses_a_missing_or_unknown_field():
    block, values = ParamBlock(*_FIELDS), _random_values()
    del values["shift"]
    with pytest.raises(TypeError, match="missing \\['shift'\\]"):
        block.pack(**values)
    with pytest.raises(TypeError, match="unknown \\['shfit'\\]"):
        block.pack(**values, shfit=1)


def test_pack_refuses_an_array_of_the_wrong_length():
    block, values = ParamBlock(*_FIELDS), _random_values()
    with pytest.raises(ValueError, match="'steps' has 4 values where its length 3 is 3"):
        block.pack(**{**values, "steps": values["steps"] + [0]})
    # an array whose length a scalar field holds: the scalar's value is its length
    with pytest.raises(ValueError, match=f"'sizes' has {values['count'] - 1} values where its length 'count' is "
                                         f"{values['count']}"):
        block.pack(**{**values, "sizes": values["sizes"][1:]})


def test_scalar_packer_gives_pack_s_words_for_new_scalars():
    """An optimizer's replayed block: the arrays fixed once, the scalars new at each call."""
    for block in (ParamBlock(*_FIELDS), ParamBlock(*reversed(_FIELDS))):
        fixed = _random_values()
        pack = block.scalar_packer(count=fixed["count"], sizes=fixed["sizes"], steps=fixed["steps"],
                                   weights=fixed["weights"])
        for _ in range(3):
            values = {**fixed, **{k: v for k, v in _random_values().items() if k in ("shift", "scale")}}
            assert pack(shift=values["shift"], scale=values["scale"]) == block.pack(**values), tag(f"{block}")
        with pytest.raises(ValueError, match="must be scalars"):
            block.scalar_packer(count=fixed["count"], shift=0, scale=0.0, steps=fixed["steps"], weights=fixed["weights"])


def test_fill_puts_includes_between_the_parameters_and_the_template(monkeypatch):
    monkeypatch.setitem(common._sources, "test_template", "fn g() -> u32 { return {{value}}; }")
    params = ParamBlock(u32("numel"))
    source = common.fill("test_template", params, includes=("workgroup",), value="params.numel")
    parts = [common.shader("common").splitlines()[0], params.wgsl(), common.shader("workgroup"),
             "fn g() -> u32 { return params.numel; }"]
    at = [source.find(part) for part in parts]
    assert -1 not in at and at == sorted(at), tag(f"common, params, includes, template at {at}")


def test_fill_refuses_an_include_with_slots(monkeypatch):
    monkeypatch.setitem(common._sources, "test_template", "fn g() -> u32 { return 0u; }")
    monkeypatch.setitem(common._sources, "test_include", "fn f() -> u32 { return {{value}}; }")
    with pytest.raises(ValueError, match="test_include.wgsl is included"):
        common.fill("test_template", ParamBlock(u32("numel")), includes=("test_include",))
