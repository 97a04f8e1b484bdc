"""einsum as permutes, reshapes, sums and one batched matmul per pair of operands, so it runs (and
differentiates) with the kernels those use. Subscripts: letters, '...' for broadcast dims, an
explicit '->' output or the implicit one (the letters used once, in order). A letter repeated
within one operand (a diagonal) is not supported."""
import math

from ..amp import autocast_op
from .matmul import matmul
from .reduce import sum as _sum
from .._tensor import Tensor


def _parse(equation, operands):
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {len(terms)} operand subscripts but {len(operands)} operands")
    batch = max((t.ndim - len(s.replace("...", "")) for s, t in zip(terms, operands) if "..." in s), default=0)
    ellipsis = "".join(chr(0x3b1 + k) for k in range(batch))   # stand-in letters for the '...' dims
    expanded = []
    for term, t in zip(terms, operands):
        if not all(c.isalpha() for c in term.replace("...", "")):
            raise ValueError(f"einsum(): invalid subscript in {term!r}: only letters and '...' are allowed")
        if "..." in term:
            own = t.ndim - len(term.replace("...", ""))
            term = term.replace("...", ellipsis[batch - own:] if own else "")
        if len(term) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in {term!r} does not match the number of "
                               f"dimensions ({t.ndim}) of its operand")
        if len(set(term)) != len(term):
            raise NotImplementedError(f"einsum(): a subscript repeated within one operand ({term!r}) is not supported")
        expanded.append(term)
    if arrow:
        output = output.replace("...", ellipsis)
    else:
        counts = {c: sum(term.count(c) for term in expanded) for c in "".join(expanded)}
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ellipsis))
    if len(set(output)) != len(output) or any(c not in "".join(expanded) for c in output):
        raise RuntimeError(f"einsum(): invalid output subscripts {output!r}")
    return expanded, output


def _sizes(terms, operands):
    sizes = {}
    for term, t in zip(terms, operands):
        for c, s in zip(term, t.shape):
            if sizes.get(c, 1) != 1 and s != 1 and sizes[c] != s:
                raise RuntimeError(f"einsum(): subscript {c} has size {s} in one operand and {sizes[c]} in another")
            sizes[c] = s if sizes.get(c, 1) == 1 else sizes[c]
    return sizes


def _drop(t, term, keep):
    """t with the dims whose letters are not in keep summed away."""
    gone = [d for d, c in enumerate(term) if c not in keep]
    if not gone:
        return t, term
    return _sum(t, tuple(gone)), "".join(c for c in term if c in keep)


def _contract(a, ta, b, tb, keep, sizes):
    """The product of a and b summed over their shared letters that are not in keep, as one matmul
    of (batch, left, shared) by (batch, shared, right); returns it and its letters."""
    batch = [c for c in ta if c in tb and c in keep]
    shared = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]

    def arrange(t, term, first, second):
        order = [term.index(c) for c in batch + first + second]
        shape = [sizes[c] for c in batch] + [math.prod(t.shape[term.index(c)] for c in first),
                                             math.prod(t.shape[term.index(c)] for c in second)]
        expanded = t.permute(order).expand([sizes[c] for c in batch] + [t.shape[i] for i in order[len(batch):]])
        return expanded.reshape(shape)
    product = matmul(arrange(a, ta, left, shared), arrange(b, tb, shared, right))
    letters = "".join(batch + left + right)
    return product.reshape([sizes[c] for c in letters]), letters


@autocast_op
def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum(): operands must be tensors")
    terms, output = _parse(equation, operands)
    sizes = _sizes(terms, operands)
    t, term = operands[0], terms[0]
    for k in range(1, len(operands)):
        later = output + "".join(terms[k + 1:])
        t, term = _drop(t, term, later + terms[k])
        b, tb = _drop(operands[k], terms[k], later + term)
        t, term = _contract(t, term, b, tb, later, sizes)
    t, term = _drop(t, term, output)
    t = t.permute([term.index(c) for c in output]) if term != output else t
    return t.expand([sizes[c] for c in output]) if tuple(t.shape) != tuple(sizes[c] for c in output) else t
