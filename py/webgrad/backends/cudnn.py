"""torch.backends.cudnn's switches, which programs set: webgrad has no cuDNN, so they change nothing."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False
