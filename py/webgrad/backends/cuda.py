"""torch.backends.cuda's switches, which programs set: webgrad has no CUDA, so they change nothing
(webgpu products are plain float32)."""
import types

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)


def is_built():
    return False
