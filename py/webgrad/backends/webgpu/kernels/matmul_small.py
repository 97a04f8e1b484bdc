"""shaders/matmul_small.wgsl's per-thread work: a software adapter's products, each thread's TM x TN
outputs summed from its rows of A and columns of B, read where they are a k step at a time (no
staging). kernels/matmul.py fills the rest of the kernel (operands, bias, store) as it does the tiled
kernel's.

Each operand form (kernels/matmul.py's MatmulOperand) is read in two parts: what depends on a
thread's row of A (column of B) is worked out once before the loop, and what depends on k is carried
from step to step by adds and selects, so that a k step costs a few adds and one read a word and no
division. (The tiled kernel's loaders work out every word from its row and k, with divisions by the
window's sizes, clamps and a select: at 8x8 a thread, unstaged reads through them were slower than
the tiled kernel on SwiftShader, bench/NOTES.md, "MNIST MLP in the page without staging"; and a
CPU divides 4 lanes one at a time.) A line past the output's edge is clamped to its last one (the
store skips it)."""


def unstaged_slots(rows, cols, a_form, b_form, read):
    """The {{declare}} and {{multiply}} slots: rows and cols, the WGSL of a thread's output rows and
    columns; a_form, b_form, the operands' MatmulOperand forms; read(x, at), the WGSL of operand x's
    word at `at` as f32."""
    declare = [f"var acc{i}_{j} = 0.0;" for i in range(len(rows)) for j in range(len(cols))]
    multiply, advance = [], []
    for x, lines, form in (("a", rows, a_form), ("b", cols, b_form)):
        kind = form if isinstance(form, str) else form[0]
        if (x, kind) not in _READERS:
            raise ValueError(f"the unstaged kernel cannot read a {kind!r} operand as {x}")
        before, step, after = _READERS[x, kind](x, lines, form, read)
        declare += before
        multiply += step
        advance += after
    multiply += [f"acc{i}_{j} = fma(a{i}, b{j}, acc{i}_{j});" for i in range(len(rows)) for j in range(len(cols))]
    return {"declare": "\n".join("    " + line for line in declare),
            "multiply": "\n".join("        " + line for line in multiply + advance)}


def _strided(x, lines, form, read):
    """A view's rows and columns: a line's address, then k's stride a step."""
    edge, line_stride, k_stride = ("m", "row_stride", "col_stride") if x == "a" else ("n", "col_stride", "row_stride")
    f = f"params.{x}_"
    before = [f"let {x}_at{q} = start.{x}_at + min({line}, {edge} - 1u) * {f}{line_stride};"
              for q, line in enumerate(lines)]
    before.append(f"var {x}_k = start.k0 * {f}{k_stride};")
    return before, [f"let {x}{q} = {read(x, f'{x}_at{q} + {x}_k')};" for q in range(len(lines))], \
        [f"{x}_k += {f}{k_stride};"]


def _split_k(x, lines, form, read):
    """A's K made of two dims (k = k1 * K2 + k2): k2 counted, k1's stride added as k2 wraps."""
    k2 = f"{form[1]}u"
    before = [f"let a_at{q} = start.a_at + min({row}, m - 1u) * params.a_row_stride;" for q, row in enumerate(lines)]
    before += [f"var a_k2 = start.k0 % {k2};",
               f"var a_k = start.k0 / {k2} * params.a_k1_stride + a_k2 * params.a_k2_stride;",
               f"let a_k1_step = params.a_k1_stride - ({k2} - 1u) * params.a_k2_stride;   // (wraps: u32)"]
    after = ["a_k2 += 1u;",
             f"let a_wrap = a_k2 == {k2};",
             "a_k2 = select(a_k2, 0u, a_wrap);",
             "a_k += select(params.a_k2_stride, a_k1_step, a_wrap);"]
    return before, [f"let a{q} = {read('a', f'a_at{q} + a_k')};" for q in range(len(lines))], after


def _window(x, lines, form, read):
    """B as a convolution's windows: K and N each walk (c, y, x) of an (H, W) image, K's y and x of
    sizes Ky, Kx, N's of Ny, Nx. A column's corner (y, x) and address; k's (c, y, x) counted, its
    offsets carried; a word outside the image reads zero (padding). Addresses are u32 sums of
    possibly negative i32 terms (mod 2^32, as the image's own are): a word outside is selected away,
    and WGSL bounds every read."""
    ky, kx, ny, nx = (f"{size}u" for size in form[1:])
    f = "params.b_"
    before = []
    for q, col in enumerate(lines):
        before += [f"let b_n{q} = min({col}, n - 1u);",
                   f"let b_y{q} = {f}y0 + i32(b_n{q} / {nx} % {ny}) * {f}n_y_step;",
                   f"let b_x{q} = {f}x0 + i32(b_n{q} % {nx}) * {f}n_x_step;",
                   f"let b_at{q} = start.b_at + b_n{q} / ({ny} * {nx}) * {f}n_c_stride"
                   f" + u32(b_y{q}) * {f}y_stride + u32(b_x{q}) * {f}x_stride;"]
    before += [f"var b_kx = start.k0 % {kx};",
               f"var b_ky = start.k0 / {kx} % {ky};",
               f"var b_kc = start.k0 / ({ky} * {kx}) * {f}k_c_stride;"]
    step = [f"let b_dy = i32(b_ky) * {f}k_y_step;",
            f"let b_dx = i32(b_kx) * {f}k_x_step;",
            f"let b_k = b_kc + u32(b_dy) * {f}y_stride + u32(b_dx) * {f}x_stride;"]
    step += [f"let b{q} = select(0.0, {read('b', f'b_at{q} + b_k')}, (u32(b_y{q} + b_dy) < {f}height)"
             f" & (u32(b_x{q} + b_dx) < {f}width));" for q in range(len(lines))]
    after = ["b_kx += 1u;",
             f"let b_next_y = b_kx == {kx};",
             "b_kx = select(b_kx, 0u, b_next_y);",
             "b_ky += u32(b_next_y);",
             f"let b_next_c = b_ky == {ky};",
             "b_ky = select(b_ky, 0u, b_next_c);",
             f"b_kc += select(0u, {f}k_c_stride, b_next_c);"]
    return before, step, after


# Which forms each side takes (kernels/matmul.py makes A's K of two dims and B's windows only).
_READERS = {("a", "strided"): _strided, ("b", "strided"): _strided, ("a", "split_k"): _split_k,
            ("b", "window"): _window}
