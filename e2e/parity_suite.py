"""The kernel parity suite: a fixed list of ops on fixed inputs, run in the page and natively.

test_kernel_parity runs this file's source inside the page (browser WebGPU through bridge.js) and
imports it natively (wgpu-py); both call run("webgpu") and must agree. Inputs come from a seeded
random.Random as plain lists, so they are bit-identical in both places whatever the GPU.
"""
import random

import webgrad as wg
import webgrad.nn.functional as F


def run(device):
    """{op name: flat list of floats} for every op of the suite."""
    rng = random.Random(1234)

    def t(*shape, lo=-2.0, hi=2.0, grad=False):
        n = 1
        for s in shape:
            n *= s
        flat = wg.tensor([rng.uniform(lo, hi) for _ in range(n)], device=device)
        return flat.reshape(shape).requires_grad_(grad)

    a, b, row = t(4, 5), t(4, 5), t(5)
    pos = t(4, 5, lo=0.1, hi=3.0)
    m1, m2, bm1, bm2 = t(6, 7), t(7, 3), t(2, 3, 4), t(2, 4, 5)
    labels = wg.tensor([0, 2, 1, 2], device=device)
    index = wg.tensor([3, 0, 0, 2], device=device)
    ops = {
        "add_broadcast": lambda: a + row,
        "sub_scalar": lambda: 1.5 - a,
        "mul": lambda: a * b,
        "div": lambda: a / pos,
        "neg_abs": lambda: (-a).abs(),
        "exp": lambda: a.exp(),
        "log": lambda: pos.log(),
        "sqrt": lambda: pos.sqrt(),
        "pow": lambda: a ** 3 + pos ** 0.5,
        "tanh": lambda: a.tanh(),
        "sigmoid": lambda: a.sigmoid(),
        "relu": lambda: a.relu(),
        "gelu": lambda: F.gelu(a),
        "maximum_clamp": lambda: wg.maximum(a, b).clamp(-1.0, 1.0),
        "where_gt": lambda: wg.where(a > b, a, b * 2),
        "compare": lambda: (a >= 0).float() + (a < b).float() * 2,
        "matmul": lambda: m1 @ m2,
        "matmul_batched": lambda: bm1 @ bm2,
        "matmul_transposed": lambda: m2.T @ m1.T,
        "sum_dim": lambda: a.sum(1),
        "sum_all": lambda: a.sum(),
        "mean_keepdim": lambda: a.mean(0, keepdim=True),
        "amax_amin": lambda: wg.cat([a.amax(1), a.amin(0)]),
        "argmax": lambda: a.argmax(1).float(),
        "var": lambda: a.var(1),
        "softmax": lambda: a.softmax(1),
        "log_softmax": lambda: a.log_softmax(0),
        "cross_entropy": lambda: F.cross_entropy(a[:, :3], labels),
        "mse_loss": lambda: F.mse_loss(a, b),
        "permute_contiguous": lambda: bm1.permute(2, 0, 1).contiguous(),
        "slice_step": lambda: a[1:, ::2] * 1,
        "index_select": lambda: a.index_select(0, index),
        "gather": lambda: a.gather(1, index.reshape(4, 1)),
        "cat_stack": lambda: wg.cat([wg.stack([a, b]).reshape(-1), row]),
    }
    results = {name: flat(op()) for name, op in ops.items()}

    # Autograd: a two-layer network's gradients.
    x, w1, b1, w2 = t(4, 3), t(3, 6, grad=True), t(6, grad=True), t(6, 3, grad=True)
    loss = F.cross_entropy((x @ w1 + b1).tanh() @ w2, labels)
    loss.backward()
    results["backward"] = flat(loss) + flat(w1.grad) + flat(b1.grad) + flat(w2.grad)

    # Convolution (windows read in place, the input's gradient through the flipped kernel at stride 1
    # and folded back at stride 2) and pooling, forward and backward.
    img, cw, cb = t(2, 3, 7, 6, grad=True), t(4, 3, 3, 3, grad=True), t(4, grad=True)
    pooled = F.max_pool2d(F.conv2d(img, cw, cb, padding=1).relu(), 2)
    strided = F.avg_pool2d(F.conv2d(img, cw, stride=2, padding=(0, 1), dilation=(1, 2)), 2, stride=1)
    ((pooled * pooled).sum() + (strided * strided).sum()).backward()
    results["conv_pool"] = flat(pooled) + flat(strided) + flat(img.grad) + flat(cw.grad) + flat(cb.grad)

    # Optimizers: three steps each of SGD with momentum and Adam on the same quadratic.
    for name, make in (("sgd_momentum", lambda p: wg.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)),
                       ("adam", lambda p: wg.optim.Adam([p], lr=0.1))):
        p = t(8, grad=True)
        target = t(8)
        opt = make(p)
        for _ in range(3):
            opt.zero_grad()
            ((p - target) ** 2).sum().backward()
            opt.step()
        results[name] = flat(p)

    # The GPU random generator: the same counter-based kernel in both places.
    wg.manual_seed(7)
    results["rand"] = flat(wg.rand(64, device=device))
    results["randn"] = flat(wg.randn(64, device=device))
    return results


def flat(tensor):
    return [float(v) for v in tensor.detach().reshape(-1).tolist()]
