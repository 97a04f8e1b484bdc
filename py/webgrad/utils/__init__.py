"""torch.utils's counterpart: utils.data (datasets, samplers, DataLoader), utils.checkpoint."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
