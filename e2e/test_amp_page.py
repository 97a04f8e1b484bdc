"""GradScaler's whole step under wg.jit in the page: the overflow check skips Adam's step on the
device (browser WebGPU through bridge.js, SwiftShader here), as natively (wgpu-py). float32:
SwiftShader has no shader-f16, so autocast float16 cannot run in this page; the gated update and
GradScaler's ops are the same either way."""
from e2e.conftest import printed_json

PROGRAM = '''
import webgrad as wg


def run():
    """Parameters, scale and step count after each whole step; the second and fifth overflow."""
    p = wg.tensor([0.5, -1.0, 2.0, 0.25], device="webgpu", requires_grad=True)
    opt = wg.optim.Adam([p], lr=0.1)
    scaler = wg.amp.GradScaler("webgpu", init_scale=2.0 ** 4, growth_interval=2)

    @wg.jit
    def step(c):
        opt.zero_grad()
        scaler.scale((p * p * c).sum()).backward()
        scaler.step(opt)
        scaler.update()
        return c.sum()
    trace = []
    for c in ([1.0, 2.0, 3.0, 4.0], [1.0, float("inf"), 0.0, 1.0], [0.5] * 4, [2.0, 1.0, 0.5, 0.25],
              [1.0, 1.0, float("nan"), 1.0], [1.0] * 4):
        step(wg.tensor(c, device="webgpu"))
        trace.append(p.tolist() + [scaler.get_scale(), float(opt.state[p]["step"])])
    return trace
'''


def test_whole_amp_step_under_jit_as_natively(page, open_playground):
    open_playground()
    in_page = printed_json(page, PROGRAM + "\nimport json\nprint('AMP', json.dumps(run()))\n", "AMP")
    native = {}
    exec(PROGRAM, native)
    expected = native["run"]()
    assert [row[-1] for row in in_page] == [row[-1] for row in expected] == [1, 1, 2, 3, 3, 4]   # skipped: no count
    assert in_page[1][:4] == in_page[0][:4] and in_page[4][:4] == in_page[3][:4], in_page   # nor a change
    for k, (got, want) in enumerate(zip(in_page, expected)):
        assert all(abs(g - w) <= 1e-5 * (1 + abs(w)) for g, w in zip(got, want)), (k, got, want)
