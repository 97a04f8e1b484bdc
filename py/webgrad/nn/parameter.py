"""Parameter, the Tensor a Module treats as learnable (assigning one to a module attribute
registers it: module.py)."""
from ..ops.creation import empty
from .._tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor sharing data's values (copied when data is not contiguous: optimizers
    update parameters flat). Ops on a Parameter give plain Tensors, as in PyTorch."""
    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor, got {type(data).__name__}")
        data = data.detach().contiguous()
        super().__init__(data._storage, data.shape, data.dtype, data.device, data._strides, data._offset)
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = Parameter(self.detach().clone(), self.requires_grad)
        return memo[id(self)]
