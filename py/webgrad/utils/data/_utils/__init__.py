"""Helpers of webgrad.utils.data, at torch.utils.data._utils's paths (programs import collate from here)."""
from . import collate

__all__ = ["collate"]
