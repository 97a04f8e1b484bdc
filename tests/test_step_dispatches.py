"""A replayed MNIST training step is as few dispatches as the kernels make it: a change that splits
one (an unfused bias, an extra reduce pass, a per-parameter copy) shows up here first."""
import pytest

import webgrad as wg
from webgrad import nn
from conftest import seed

# batch 128, Adam: the forward products with their biases, cross-entropy's one kernel each way, the
# gradients' products and reductions, and one fused update per parameter. A GPU's plan has one more:
# the first layer's weight gradient splits its long K (784 or 18432) over more workgroups and sums the
# pieces after (a software adapter's shader loops may be long, so it does not split there).
DISPATCHES = {("mlp", "gpu"): 16, ("cnn", "gpu"): 40, ("mlp", "software"): 15, ("cnn", "software"): 39}


@pytest.mark.parametrize("name,plan", sorted(DISPATCHES))
def test_replayed_mnist_step_dispatches(name, plan, monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", plan == "software")
    wg.manual_seed(seed())
    x = wg.rand(128, 1, 28, 28, device="webgpu")
    y = (wg.rand(128, device="webgpu") * 10).int()
    model = nn.MODELS[name](device="webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    @wg.jit
    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    losses = [step(x, y).item() for _ in range(3)]   # eager, recorded, replayed
    (program,) = step._programs.values()
    assert len(program.recording.dispatches) == DISPATCHES[name, plan]
    assert losses[2] < losses[0]
