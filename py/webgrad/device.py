"""torch.device, and what programs ask about accelerators (torch.cuda, torch.accelerator).

A device is also the plain string of its type ("cpu", "webgpu"), so tensors' devices compare
equal to strings and to device objects alike, and index dicts as either.
"""


class device(str):   # torch.device (lower case: torch's name)
    def __new__(cls, type, index=None):
        if isinstance(type, device):
            return type
        name = str(type)
        if ":" in name:   # "webgpu:0": webgrad has one adapter per device type
            name, _, at = name.partition(":")
            index = int(at)
        self = super().__new__(cls, name)
        self.index = index
        return self

    @property
    def type(self):
        return str(self)

    def __repr__(self):
        return f"device(type='{self}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __reduce__(self):
        return device, (str(self), self.index)


def _webgpu_available():
    from .backends import get_backend
    try:
        get_backend("webgpu")
        return True
    except RuntimeError:
        return False


class accelerator:
    """The WebGPU adapter is webgrad's accelerator."""

    @staticmethod
    def is_available():
        return _webgpu_available()

    @staticmethod
    def current_accelerator(check_available=False):
        return device("webgpu") if not check_available or _webgpu_available() else None

    @staticmethod
    def device_count():
        return int(_webgpu_available())

    @staticmethod
    def synchronize(device=None):
        from .backends import get_backend
        get_backend("webgpu").sync()


class cuda:
    """webgrad has no CUDA device: programs that test for it take their other path (use "webgpu")."""

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def is_bf16_supported():
        return False

    @staticmethod
    def manual_seed(seed):   # seeding CUDA's generators: nothing to seed
        pass

    manual_seed_all = manual_seed

    @staticmethod
    def empty_cache():
        pass
