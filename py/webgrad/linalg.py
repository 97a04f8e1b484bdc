"""torch.linalg's names (those webgrad has)."""
from .ops.matmul import matmul
from .ops.reduce import vector_norm

__all__ = ["matmul", "vector_norm"]
