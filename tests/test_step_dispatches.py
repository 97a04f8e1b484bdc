"""A replayed training step is as few dispatches as the kernels make it: a change that splits one (an
unfused bias, an extra reduce pass, a per-parameter copy or update) shows up here first."""
import pytest

import webgrad as wg
from webgrad import nn
from conftest import seed

# MNIST, batch 128, Adam: the forward products with their biases, cross-entropy's one kernel for the
# loss and its gradient (backward()'s implicit 1 folded into the forward: fusion_loss.py), the
# gradients' products and reductions, and one fused update for all the parameters (they and Adam's
# state live in one arena; each gradient is read where backward wrote it). A GPU's plan has one
# more: the first Linear's product splits its long K (784 or 1568) over more workgroups and sums the
# pieces after (a software adapter's shader loops may be long, so it does not split there); the CNN's
# weight gradients split too, on both plans.
# With an update per parameter these were 16 and 40 (15 and 39 on the software plan).
# The 2-layer GPT (nanoGPT's AdamW with decay and no-decay groups, gradients clipped to norm 1): one
# update per group, and clipping in four (the norm's partials over all the gradients, their sum, its
# square root, one scale of all the gradients). With an update per parameter (28) and clipping per
# gradient it was 244 dispatches; without wg.jit's elementwise fusion it is 112, and was 314.
# Epilogues (fusion.py) take the maps after an unsplit product into its store: each ReLU after its
# Linear or conv, and relu's gradient after the product that makes its incoming gradient (the GPT:
# GELU and its gradient, residual adds). A split K is summed by a reduction, and the maps go into that
# sum's store (on a GPU's plan the MLP's first Linear, K = 784, and the CNN's, K = 1568, split); so does
# clipping's square root of the summed norm. The max pools take maps in their stores too: relu's
# gradient runs in each pool's backward. Without epilogues: MLP 13 and 12, CNN 33 and 32, GPT 102;
# with the products' alone: MLP 12 and 10, CNN 30 and 28, GPT 83.
# The GPT's q, k, v split: its gradient is one write per piece into one buffer (autograd.WindowGrad);
# a zero-filled whole per piece and their sums made it 93. Attention writes its output (and dq, dk, dv)
# in its inputs' layout, so y.transpose(1, 2).contiguous() is a view: with the output contiguous, its
# copy per layer made it 85 (the gradients' copies back through the transposes fused into the writes).
# With cross-entropy's backward a kernel of its own: MLP 11 and 10, CNN 27 and 26, GPT 82. A GPU sums
# each conv's bias gradient in one pass (kernels/reduce.py's runs form), where two made the CNN's 26.
# Layer norm's backward takes the residual gradient's add into its store (kernels/norm.py's producer):
# with those adds kernels of their own, the GPT's was 81.
DISPATCHES = {("mlp", "gpu"): 10, ("cnn", "gpu"): 24, ("mlp", "software"): 9, ("cnn", "software"): 25,
              ("gpt", "gpu"): 77, ("gpt", "software"): 77}
UPDATES = {"mlp": 1, "cnn": 1, "gpt": 2}


def _kernels(program, family):
    """How many of the recording's dispatches run kernels of family (a pipeline key's first word)."""
    runtime = wg.get_backend("webgpu").runtime
    pipelines = {pipeline for key, pipeline in runtime._pipelines.items() if key[0] == family}
    return sum(pipeline in pipelines for pipeline, _, _ in program.recording.dispatches)


def _submitted_per_call(step, *inputs):
    """The dispatches one call of step submits."""
    runtime = wg.get_backend("webgpu").runtime
    runtime.sync()
    submit, submitted = runtime.driver.submit, []

    def counted(params, bind_groups, dispatches, timed=False):
        submitted.extend(dispatches)
        return submit(params, bind_groups, dispatches, timed)
    runtime.driver.submit = counted
    try:
        step(*inputs)
        runtime.sync()
    finally:
        runtime.driver.submit = submit
    return len(submitted)


def _replayed(step, *inputs):
    losses = [step(*inputs).item() for _ in range(3)]   # eager, recorded, replayed
    (program,) = step._programs.values()
    assert losses[2] < losses[0]
    return program


@pytest.mark.parametrize("name,plan", sorted(k for k in DISPATCHES if k[0] != "gpt"))
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
    program = _replayed(step, x, y)
    assert _kernels(program, "optim") == UPDATES[name]
    assert len(program.recording.dispatches) == DISPATCHES[name, plan]
    # a replay binds inputs that fill their buffers where the recording read its own, and hands the loss
    # over in the buffer it wrote: it submits the recording's dispatches and nothing else
    assert _submitted_per_call(step, x, y) == DISPATCHES[name, plan]
    # slices of larger tensors are copied into the recording's own input buffers, a dispatch each
    images, labels = wg.rand(256, 1, 28, 28, device="webgpu"), (wg.rand(256, device="webgpu") * 10).int()
    assert _submitted_per_call(step, images[128:], labels[128:]) == DISPATCHES[name, plan] + 2


@pytest.mark.parametrize("plan", ["gpu", "software"])
def test_replayed_gpt_step_dispatches(plan, monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", plan == "software")
    wg.manual_seed(seed())
    model = nn.GPT(nn.GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=4, n_embd=32), device="webgpu")
    opt = model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3)
    x, y = ((wg.rand(8, 16, device="webgpu") * 32).int() for _ in range(2))

    @wg.jit
    def step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    program = _replayed(step, x, y)
    assert (_kernels(program, "optim"), _kernels(program, "grad_norm"), _kernels(program, "grad_scale")) == \
        (UPDATES["gpt"], 1, 1)
    assert len(program.recording.dispatches) == DISPATCHES["gpt", plan]
