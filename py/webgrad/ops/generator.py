"""torch.Generator: a seed and a position (offset) in the counter-based random stream that every
random op draws from (element n of a draw is a hash of offset + n and the seed: shaders/random.wgsl,
and its NumPy twin in backends/cpu.py, so a seed gives the same numbers on every device).

default_generator serves the ops called without generator=; manual_seed seeds it.
"""
import os
import struct
import sys

# torch's default seed
DEFAULT_SEED = 67280421310721
_STATE = struct.Struct("<QQ")   # get_state's bytes: the seed, the offset


def _check_seed(seed):
    if not hasattr(seed, "__index__"):   # ints (NumPy's too), not floats
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    seed = seed.__index__()
    if not -2**63 <= seed < 2**64:
        raise ValueError(f"Overflow when unpacking long long: seed {seed} is outside [-2**63, 2**64)")
    return seed % 2**64   # negative seeds count down from 2**64, as in torch


class Generator:
    def __init__(self, device="cpu"):
        self.device = device
        self._seed = DEFAULT_SEED
        self._offset = 0

    def manual_seed(self, seed):
        """Restart the stream at seed; returns the generator."""
        self._seed = _check_seed(seed)
        self._offset = 0
        return self

    def seed(self):
        """Seed from the operating system's randomness; returns the new seed."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """A uint8 tensor of the seed and offset (set_state takes it back), on the cpu device as in
        PyTorch; in the page, which has no cpu device (no NumPy), on webgpu."""
        from .creation import frombuffer
        device = "webgpu" if sys.platform == "emscripten" else "cpu"
        return frombuffer(bytearray(_STATE.pack(self._seed, self._offset)), device=device)

    def set_state(self, new_state):
        from .._tensor import Tensor
        from .. import dtypes
        if not isinstance(new_state, Tensor) or new_state.dtype is not dtypes.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        if new_state.numel() != _STATE.size:
            raise RuntimeError(f"Expected an RNG state of size {_STATE.size} but found the input RNG state size "
                               f"to be {new_state.numel()}")
        self._seed, self._offset = _STATE.unpack(new_state._host_bytes())
        return self

    def drawer(self, count):
        """A function giving the (seed, offset) of `count` fresh numbers and moving the stream past
        them; it runs again at each jit replay, so replays draw fresh numbers."""
        def draw():
            offset = self._offset
            self._offset = (offset + count) % 2**64
            return self._seed & 0xFFFFFFFF, offset & 0xFFFFFFFF
        return draw

    def __repr__(self):
        return f"<webgrad.Generator seed={self._seed} offset={self._offset}>"


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (behind rand/randn/randint/multinomial/nn.init/dropout)."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)
