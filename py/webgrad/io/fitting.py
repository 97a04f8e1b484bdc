"""Whether a file's tensors fit a model, said in a user's terms: a weights file made for another
model fails here with "made for a different model: expected 1.weight 128x784, got 64x784" before
load_state_dict would raise about it."""


def check_fits(state, model, where):
    """state (name -> tensor, as wg.load returns a state_dict) if it has the names and shapes of
    model's state_dict; else a ValueError naming where (the file) and the first difference: a shape
    first (the most telling), then a tensor the model needs, then one it has no place for."""
    difference = mismatch({name: tuple(t.shape) for name, t in state.items()},
                          {name: tuple(t.shape) for name, t in model.state_dict().items()})
    if difference:
        raise ValueError(f"{where}: made for a different model: {difference}")
    return state


def mismatch(found, expected):
    """How found (name -> shape) differs from expected, as "expected ..., got ...", or None."""
    for name, shape in expected.items():
        if name in found and found[name] != shape:
            return f"expected {name} {shape_text(shape)}, got {shape_text(found[name])}"
    missing = [name for name in expected if name not in found]
    extra = [name for name in found if name not in expected]
    if missing:
        held = f" (the file holds {', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''})" if extra else ""
        return f"expected {missing[0]} {shape_text(expected[missing[0]])}, got no tensor of that name{held}"
    if extra:
        surplus = f"{extra[0]} {shape_text(found[extra[0]])}"
        return f"expected the model's {len(expected)} tensors, got {len(found)}: {surplus} too"
    return None


def shape_text(shape):
    """(128, 784) as "128x784"; () as "a scalar"."""
    return "x".join(map(str, shape)) if shape else "a scalar"
