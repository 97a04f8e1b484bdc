"""torch.backends.mps, as programs ask it: webgrad's GPU device is 'webgpu', not Metal's MPS."""


def is_available():
    return False


def is_built():
    return False
