"""A parameter block packed whole (kernels/map.py's block_packer, as map's kernels pack theirs):
the block submitted is the words' block, wherever the fixed head ends; too many words are refused
by name, packed either way."""
import numpy as np
import pytest

from webgrad.backends.webgpu.kernels.map import block_packer
from webgrad.backends.webgpu.runtime import PARAMS_BYTES, PARAMS_WORDS
from conftest import rng, tag
from runtime_fakes import blocks_of, kernel


def test_a_packed_block_is_its_words_block(fake_runtime):
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    a, b = runtime.alloc(64), runtime.alloc(64)
    g = rng()
    cases = []
    for _ in range(10):
        count = int(g.integers(1, PARAMS_WORDS + 1))
        tail = int(g.integers(0, count + 1))   # the words given per call, the last ones
        words = [int(w) for w in g.integers(0, 2**32, count)]
        head, tail_struct = block_packer(words[:count - tail], tail)
        runtime.dispatch(pipeline, [a, b], head + tail_struct.pack(*words[count - tail:]), 1)
        runtime.dispatch(pipeline, [a, b], words, 1)   # the same words as a list, packed by dispatch
        cases.append((count, tail, words))
    runtime.flush()
    [(_, params, _, dispatches)] = driver.logged("submit")
    assert [d[2] for d in dispatches] == [i * PARAMS_BYTES for i in range(2 * len(cases))], tag()
    blocks = blocks_of(params)
    for (count, tail, words), packed, listed in zip(cases, blocks[::2], blocks[1::2]):
        want = np.array(words, np.uint32).tobytes() + bytes(PARAMS_BYTES - 4 * count)
        assert packed == want, tag(f"{count} words, the last {tail} given per call")
        assert listed == want, tag(f"{count} words as a list")


def test_too_many_words_are_refused(fake_runtime):
    _, runtime = fake_runtime()
    pipeline = kernel(runtime)
    a, b = runtime.alloc(64), runtime.alloc(64)
    tail = int(rng().integers(0, PARAMS_WORDS + 2))
    with pytest.raises(RuntimeError, match=f"exceed {PARAMS_WORDS} words"):
        block_packer([0] * (PARAMS_WORDS + 1 - tail), tail)
    with pytest.raises(RuntimeError, match=f"exceed {PARAMS_WORDS} words"):
        runtime.dispatch(pipeline, [a, b], [0] * (PARAMS_WORDS + 1), 1)
    runtime.flush()
