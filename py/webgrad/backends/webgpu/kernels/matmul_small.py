"""shaders/matmul_small.wgsl's per-thread work: a software adapter's products, each thread's TM x TN
outputs summed from its rows of A and columns of B, read where they are a k step at a time (no
staging). kernels/matmul.py fills the rest of the kernel (operands, loaders, bias, store) as it does
the tiled kernel's."""


def unstaged_slots(rows, cols, a_form, b_form, read):
    """The {{declare}} and {{multiply}} slots: rows and cols, the WGSL of a thread's output rows and
    columns; a_form, b_form, the operands' MatmulOperand forms; read(x, at), the WGSL of operand x's
    word at `at` as f32. A strided operand's rows of A (columns of B) are clamped to the output (the
    store skips what is past it) and their addresses worked out before the loop, so that a k step
    costs an add and a read a word; the other forms go through the tiled kernel's loaders (bounds,
    clamps and a select on every read: at 8x8 a thread, slower than the tiled kernel on SwiftShader,
    bench/NOTES.md, "MNIST MLP in the page without staging")."""
    declare = [f"var acc{i}_{j} = 0.0;" for i in range(len(rows)) for j in range(len(cols))]
    multiply = []
    for x, lines, edge, line_stride, k_stride in (("a", rows, "m", "row_stride", "col_stride"),
                                                  ("b", cols, "n", "col_stride", "row_stride")):
        form = a_form if x == "a" else b_form
        if form == "strided":
            declare += [f"let {x}_at{q} = start.{x}_at + min({line}, {edge} - 1u) * params.{x}_{line_stride};"
                        for q, line in enumerate(lines)]
            multiply.append(f"let {x}_k = t * params.{x}_{k_stride};")
            multiply += [f"let {x}{q} = {read(x, f'{x}_at{q} + {x}_k')};" for q in range(len(lines))]
        else:   # the loaders' slot: the row of A (column of B) in the workgroup's block, K's step t
            slot = "vec2({} - row0, 0u)" if x == "a" else "vec2(0u, {} - col0)"
            multiply += [f"let {x}{q} = load_{x}({slot.format(line)}, row0, col0, t, start.{x}_at, m, n, k);"
                         for q, line in enumerate(lines)]
    multiply += [f"acc{i}_{j} = fma(a{i}, b{j}, acc{i}_{j});" for i in range(len(rows)) for j in range(len(cols))]
    return {"declare": "\n".join("    " + line for line in declare),
            "multiply": "\n".join("        " + line for line in multiply)}
