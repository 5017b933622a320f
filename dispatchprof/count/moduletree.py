"""A model's module tree, walked without recursion: names, parents and tensor sizes of every
module in one pass, so the tracker spends O(1) per module call however deep the model.

`ModuleTree(root)` visits ``root``'s modules in ``named_modules()`` order (first path of a
module object wins) with an explicit stack. Inclusive PARAMS and BUFFERS are summed bottom-up
when no module and no tensor appears twice in the tree; otherwise (tied weights, shared
modules) they come from torch's own iterators, which count a shared tensor once per subtree.
"""

from __future__ import annotations

from typing import Any, Iterator

from torch import nn

Sizes = tuple[int, int]      # (elements, bytes)


def _size(tensors: Any) -> Sizes:
    elements = nbytes = 0
    for t in tensors:
        elements += t.numel()
        nbytes += t.numel() * t.element_size()
    return elements, nbytes


def walk(root: nn.Module) -> Iterator[tuple[str, nn.Module, bool]]:
    """(name, module, first) in named_modules() order; ``first`` is False for a module object
    met again under another path (its subtree is not walked again)."""
    seen: set[int] = set()
    stack: list[tuple[str, nn.Module]] = [("", root)]
    while stack:
        name, module = stack.pop()
        first = id(module) not in seen
        yield name, module, first
        if not first:
            continue
        seen.add(id(module))
        children = [(f"{name}.{k}" if name else k, m) for k, m in module._modules.items() if m is not None]
        stack.extend(reversed(children))


class ModuleTree:
    """Names and sizes of the modules under one root (see module docstring)."""

    def __init__(self, root: nn.Module) -> None:
        self.names: dict[int, str] = {}
        self.modules: list[nn.Module] = []
        self.tensors: list[Any] = []            # every parameter and buffer, once
        children: dict[int, list[int]] = {}
        clean = True
        seen_tensors: set[int] = set()
        for name, module, first in walk(root):
            if not first:
                clean = False
                continue
            self.names[id(module)] = name
            self.modules.append(module)
            children[id(module)] = [id(m) for m in module._modules.values() if m is not None]
            for t in (*module._parameters.values(), *module._buffers.values()):
                if t is None:
                    continue
                if id(t) in seen_tensors:
                    clean = False
                    continue
                seen_tensors.add(id(t))
                self.tensors.append(t)
        self._params: dict[int, Sizes] = {}
        self._buffers: dict[int, Sizes] = {}
        if clean:
            for module in reversed(self.modules):          # children before parents
                p = _size(t for t in module._parameters.values() if t is not None)
                b = _size(t for t in module._buffers.values() if t is not None)
                for c in children[id(module)]:
                    p = (p[0] + self._params[c][0], p[1] + self._params[c][1])
                    b = (b[0] + self._buffers[c][0], b[1] + self._buffers[c][1])
                self._params[id(module)], self._buffers[id(module)] = p, b

    def params(self, module: nn.Module) -> Sizes:
        """Inclusive parameter (elements, bytes), each tensor once."""
        known = self._params.get(id(module))
        return known if known is not None else _size(module.parameters())

    def buffers(self, module: nn.Module) -> Sizes:
        """Inclusive buffer (elements, bytes), each tensor once."""
        known = self._buffers.get(id(module))
        return known if known is not None else _size(module.buffers())


def relative_name(parent: nn.Module, module: nn.Module, tree: ModuleTree | None,
                  direct: dict[int, str]) -> str | None:
    """``module``'s path inside ``parent`` as named_modules(parent) gives it: a direct child's
    attribute name (``direct`` maps id -> name for parent's children), else from the canonical
    names of ``tree``, else by walking parent's subtree (rare: shared or foreign modules)."""
    name = direct.get(id(module))
    if name is not None:
        return name
    if tree is not None:
        p, m = tree.names.get(id(parent)), tree.names.get(id(module))
        if p is not None and m is not None and (p == "" or m.startswith(p + ".")):
            return m[len(p) + 1:] if p else m
    for name, sub, _ in walk(parent):
        if sub is module and name:
            return name
    return None


def size_of(tensors: Any) -> Sizes:
    """(elements, bytes) of some tensors."""
    return _size(tensors)
