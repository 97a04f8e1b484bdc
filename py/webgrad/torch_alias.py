"""`import torch` as webgrad, for PyTorch programs run unchanged where no real torch is (the page).

install() puts a finder first on sys.meta_path that answers every import of `torch` or
`torch.<name>` with the webgrad module of the same path (`torch.nn.functional` is
webgrad.nn.functional, the same module object), so `import torch.nn as nn` and
`from torch.utils.data import DataLoader` work as written. An import webgrad has no module for
fails as any missing module does.
"""
import importlib
import importlib.abc
import importlib.util
import sys

_PREFIX = "torch"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        target_name = "webgrad" + fullname[len(_PREFIX):]
        if importlib.util.find_spec(target_name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=target_name)

    def create_module(self, spec):
        return importlib.import_module(spec.origin)

    def exec_module(self, module):
        pass   # the webgrad module ran when it was first imported


def install():
    """Make `import torch` give webgrad (idempotent)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
