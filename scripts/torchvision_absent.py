"""Lets timm import where torchvision cannot load, for the zoo's timm rows only.

timm imports torchvision at import time (``FrozenBatchNorm2d``, its data transforms and
datasets) although its classification models never call a torchvision op. Where the only
torchvision wheel for this torch is a CUDA build (torch 2.13 CPU: torchvision 0.28.0's ``_C.so``
needs ``libc10_cuda.so``), ``install()`` puts placeholder ``torchvision`` modules in
``sys.modules``: every attribute is a placeholder class, and calling one raises ImportError
naming the cause. The counts of a timm model do not depend on them; a model that would call a
torchvision op fails loudly instead of counting something else.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

ROOT = "torchvision"


class _Placeholder(type):
    """A class standing for a torchvision name; its attributes are placeholders too."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        raise ImportError(f"{cls.__qualname__} is a placeholder: torchvision could not be loaded on this torch "
                          f"(scripts/torchvision_absent.py)")


def _placeholder(qualname: str) -> type:
    return _Placeholder(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname})


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder:
    """Makes every ``torchvision.*`` import a placeholder module (a meta path finder)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name != ROOT and not name.startswith(ROOT + "."):
            return None
        return importlib.machinery.ModuleSpec(name, _Finder, is_package=True)

    @staticmethod
    def create_module(spec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        return None


def loads() -> bool:
    """True when the installed torchvision imports (nothing to stand in for)."""
    try:
        import torchvision  # noqa: F401
    except Exception:   # noqa: BLE001 - absent, or a wheel built for another torch or CUDA
        for name in [n for n in sys.modules if n == ROOT or n.startswith(ROOT + ".")]:
            del sys.modules[name]
        return False
    return True


def install() -> None:
    """Placeholder torchvision modules from now on in this process, unless torchvision loads."""
    if not loads() and not any(isinstance(f, type) and f is _Finder for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder)
