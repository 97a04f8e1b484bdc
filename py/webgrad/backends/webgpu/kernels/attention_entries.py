"""The attention family's entry points but delta, written out as WGSL lines: the tiled ones (forward,
dkv, dq) per head size and blocking, the weights entries per row length (shaders/attention.wgsl says
what each computes; kernels/attention.py picks the blocking and dispatches them)."""

Q, K, V, DOUT = range(4)   # shaders/attention.wgsl's operand numbers


def _operand(which):
    """fetch()'s arguments for operand `which`: its number, its batch's start and its strides."""
    name = ("q", "k", "v", "dout")[which]
    return f"{which}u, at.{name}.start, vec2(at.{name}.row, at.{name}.col)"


def _score(query, key, dot):
    """The masked, scaled score of (query, key) from their dot product (WGSL expressions)."""
    mask_at = f"at.mask.start + ({query}) * at.mask.row + ({key}) * at.mask.col"
    return f"score({query}, {key}, {dot} * params.scale, {mask_at})"


def _product(name, own, other, n4, own_rows, other_rows, tiles):
    """name{i}{j}: own row i . tile row j of operands `own` and `other` over n4 vec4s, staged CHUNK
    vec4s at a time; each thread fetches its share of the next chunk into registers while the
    current one is used (only the first chunk waits for global memory; holding the next product's
    or tile's first chunk across the tile as well measured no faster on the H100). own_rows,
    other_rows: (first row, row count) as WGSL expressions."""
    mine, theirs = range(tiles.own_each), range(tiles.other_each)
    lines = [f"{name}{i}{j} = 0.0;" for i in mine for j in theirs]
    sides = [("a", own, own_rows, "OWN", "A_AT", tiles.own), ("b", other, other_rows, "OTHER", "B_AT", tiles.other)]
    fetches = [(f"{name}_{side}{u}", f"li + {u}u * THREADS", which, ", ".join(rows), size, at)
               for side, which, rows, size, at, count in sides for u in range(-(-count * tiles.chunk // tiles.threads))]

    def fetch(d0):
        return [f"{reg} = fetch({i}, {_operand(which)}, {rows}, {size}, {d0}, CHUNK);"
                for reg, i, which, rows, size, _ in fetches]
    lines += [f"var {reg} = vec4<f32>();" for reg, *_ in fetches] + fetch("0u")
    lines += [f"for (var d0 = 0u; d0 < {n4}u; d0 += CHUNK) {{"]
    lines += [f"    put({i}, {at}, {size}, CHUNK, CHUNK + 1u, {reg});" for reg, i, _, _, size, at in fetches]
    lines += ["    workgroupBarrier();", f"    if (d0 + CHUNK < {n4}u) {{"]
    lines += ["        " + line for line in fetch("d0 + CHUNK")] + ["    }", "    for (var d = 0u; d < CHUNK; d++) {"]
    lines += [f"        let a{i} = scratch[A_AT + (r + {i}u * RG) * (CHUNK + 1u) + d];" for i in mine]
    lines += [f"        let b{j} = scratch[B_AT + (c + {j}u * GROUPS) * (CHUNK + 1u) + d];" for j in theirs]
    lines += [f"        {name}{i}{j} += dot(a{i}, b{j});" for i in mine for j in theirs]
    return lines + ["    }", "    workgroupBarrier();", "}"]


def _tile_fetch(name, operand, other_rows, tiles):
    """The thread's share of the whole tile of `operand` (rows other_rows, PARTS slices of XW vec4s),
    fetched into registers tile_{name}{p}_{u} for _weights and _accumulate. Fetched before a tile's
    products (forward, dq), its wait hides behind them (H100: forward -14%, dq the same); dkv fetches
    each of its two tiles just before _weights (ahead of its products it measured 2% slower: more
    registers held through both)."""
    return [f"let tile_{name}{p}_{u} = fetch(li + {u}u * THREADS, {_operand(operand)}, {other_rows[0]}, "
            f"{other_rows[1]}, OTHER, {p}u * XW, XW);" for p in range(tiles.parts) for u in range(_tile_shares(tiles))]


def _tile_shares(tiles):
    """vec4s of a tile's slice per thread."""
    return -(-tiles.other * tiles.xw // tiles.threads)


def _put_tile(tile, part, tiles):
    return [f"put(li + {u}u * THREADS, X_AT, OTHER, XW, XW, tile_{tile}{part}_{u});"
            for u in range(_tile_shares(tiles))]


def _weights(name, tile, tiles):
    """Shares the thread's weights name{i}{j} through workgroup memory and puts the first slice of the
    tile that they weigh (_tile_fetch's tile_{tile}) in scratch, then waits for the workgroup."""
    lines = [f"scratch[W_AT + (c + {j}u * GROUPS) * (OWN / 4u) + {h}u * RG + r] = "
             f"vec4({', '.join(f'{name}{i}{j}' for i in range(4 * h, 4 * h + 4))});"
             for j in range(tiles.other_each) for h in range(tiles.own_each // 4)]
    return lines + _put_tile(tile, 0, tiles) + ["workgroupBarrier();"]


def _accumulate(acc, count, tile, tiles):
    """acc{i}_{m} += sum over the tile of weight (i, j) * the tile row j's vec4 c + m GROUPS, a staged
    slice of the tile (_weights' first, then each next) at a time."""
    per = tiles.xw // (tiles.other // tiles.other_each)   # a slice's vec4s a thread accumulates
    lines = []
    for part in range(tiles.parts):
        mine = range(part * per, min(count, (part + 1) * per))
        if not mine:
            break
        if part:
            lines += _put_tile(tile, part, tiles) + ["workgroupBarrier();"]
        lines += ["for (var j = 0u; j < OTHER; j++) {"]
        lines += [f"    let w{h} = scratch[W_AT + j * (OWN / 4u) + {h}u * RG + r];" for h in range(tiles.own_each // 4)]
        lines += [f"    let x{m} = scratch[X_AT + j * XW + c + {m - part * per}u * GROUPS];" for m in mine]
        lines += [f"    {acc}{i}_{m} = fma(vec4(w{i // 4}[{i % 4}]), x{m}, {acc}{i}_{m});"
                  for i in range(tiles.own_each) for m in mine]
        lines += ["}", "workgroupBarrier();"]
    return lines


def _store(acc, count, rows, target, size, factor, tiles):
    """Writes acc{i}_{m} * factor for the thread's own rows below `rows` through Operand at.{target}."""
    lines = []
    for i in range(tiles.own_each):
        lines += [f"if (first + r + {i}u * RG < {rows}) {{",
                  f"    let base = at.{target}.start + (first + r + {i}u * RG) * at.{target}.row;"]
        lines += [f"    put4(base, {size}, c + {m}u * GROUPS, {acc}{i}_{m} * {factor});" for m in range(count)]
        lines += ["}"]
    return lines


def _declare(tiles, *names, count=0):
    """Scalars name{i}{j} (count 0) or vec4 accumulators name{i}_{m}, m < count."""
    mine = range(tiles.own_each)
    if not count:
        return [f"var {n}{i}{j} = 0.0;" for n in names for i in mine for j in range(tiles.other_each)]
    return [f"var {n}{i}_{m} = vec4<f32>();" for n in names for i in mine for m in range(count)]


def _tree(op, terms):
    """terms combined pairwise, as a balanced tree (op: 'max' or 'add'), a WGSL expression."""
    while len(terms) > 1:
        pairs = [terms[n:n + 2] for n in range(0, len(terms), 2)]
        terms = [(f"max({p[0]}, {p[1]})" if op == "max" else f"({p[0]} + {p[1]})") if len(p) == 2 else p[0]
                 for p in pairs]
    return terms[0]


def entry_body(entry, nq, nv, tiles):
    """The body of entry point `entry` (forward, dkv or dq) for heads of nq (q, k) and nv (v) vec4s, blocked as
    `tiles` (kernels/attention.py's Tiles), as lines of WGSL."""
    mq, mv = (-(-n // (tiles.other // tiles.other_each)) for n in (nq, nv))
    mine, theirs = range(tiles.own_each), range(tiles.other_each)
    own_row = [f"first + r + {i}u * RG" for i in mine]
    tile_row = [f"start + c + {j}u * GROUPS" for j in theirs]
    rows = "params.keys" if entry == "dkv" else "params.queries"
    body = [f"let b = block(wg, nwg, {rows}, OWN);",
            "if (b.x >= params.batch) {", "    return;", "}",
            "let at = place(b.x);", "let first = b.y;", "let r = li / GROUPS;", "let c = li % GROUPS;"]
    if entry == "forward":
        keys, own = ("start", "params.keys"), ("first", "params.queries")
        body += _declare(tiles, "s", "p") + _declare(tiles, "a", count=mv)
        body += [f"var top{i} = LOWEST;" for i in mine] + [f"var total{i} = 0.0;" for i in mine]
        body += ["for (var start = 0u; start < keys_end(first); start += OTHER) {"]
        loop = _tile_fetch("v", V, keys, tiles) + _product("s", Q, K, nq, own, keys, tiles)
        loop += [f"s{i}{j} = {_score(own_row[i], tile_row[j], f's{i}{j}')};" for i in mine for j in theirs]
        for i in mine:   # the tile's max of the thread's part of row i, shared with the row's threads
            unmasked = [f"select(LOWEST, s{i}{j}, !is_masked(s{i}{j}))" for j in theirs]
            loop += [f"row_stats[(r + {i}u * RG) * GROUPS + c] = {_tree('max', unmasked)};"]
        loop += ["workgroupBarrier();"]
        for i in mine:
            loop += [f"let top_{i} = row_max(r + {i}u * RG, top{i});",
                     f"let rescale{i} = exp(top{i} - top_{i});", f"top{i} = top_{i};"]
            loop += [f"a{i}_{m} *= rescale{i};" for m in range(mv)]
            loop += [f"p{i}{j} = select(0.0, exp(s{i}{j} - top{i}), !is_masked(s{i}{j}));" for j in theirs]
            loop += [f"total{i} = total{i} * rescale{i} + {_tree('add', [f'p{i}{j}' for j in theirs])};"]
        loop += _weights("p", "v", tiles) + _accumulate("a", mv, "v", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += [f"row_stats[(r + {i}u * RG) * GROUPS + c] = total{i};" for i in mine] + ["workgroupBarrier();"]
        body += [f"let sum{i} = row_total(r + {i}u * RG);" for i in mine]
        body += [f"let inverse{i} = select(0.0, 1.0 / sum{i}, sum{i} > 0.0);" for i in mine]
        for i in mine:
            body += [f"a{i}_{m} *= inverse{i};" for m in range(mv)]
        body += _store("a", mv, "params.queries", "out", "params.value_head", "1.0", tiles)
        for i in mine:
            body += [f"if (c == 0u && {own_row[i]} < params.queries) {{",
                     f"    out[params.lse_at + at.batch * params.queries + {own_row[i]}] = "
                     f"select(f32_from_bits(MASKED), top{i} + log(sum{i}), sum{i} > 0.0);", "}"]
    elif entry == "dq":
        keys, own = ("start", "params.keys"), ("first", "params.queries")
        body += _declare(tiles, "s", "dp") + _declare(tiles, "a", count=mq)
        for i in mine:   # the rows' (lse, D) from the delta pass, in this kernel's own buffer
            body += [f"let stat{i} = at.batch * params.queries + min({own_row[i]}, params.queries - 1u);",
                     f"let lse{i} = out[params.stats_at + 2u * stat{i}];",
                     f"let delta{i} = out[params.stats_at + 2u * stat{i} + 1u];"]
        body += ["for (var start = 0u; start < keys_end(first); start += OTHER) {"]
        loop = _tile_fetch("k", K, keys, tiles) + _product("s", Q, K, nq, own, keys, tiles)
        loop += _product("dp", DOUT, V, nv, own, keys, tiles)
        for i in mine:
            for j in theirs:
                loop += [f"s{i}{j} = {_score(own_row[i], tile_row[j], f's{i}{j}')};",
                         f"s{i}{j} = select(0.0, exp(s{i}{j} - lse{i}) * (dp{i}{j} - delta{i}), !is_masked(s{i}{j}));"]
        loop += _weights("s", "k", tiles) + _accumulate("a", mq, "k", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += _store("a", mq, "params.queries", "out", "params.head", "params.scale", tiles)
    else:
        queries, own = ("start", "params.queries"), ("first", "params.keys")
        body += _declare(tiles, "s", "dp") + _declare(tiles, "dk", count=mq) + _declare(tiles, "dv", count=mv)
        body += ["// causal: the queries before the workgroup's first key attend none of its keys",
                 "for (var start = select(0u, first, params.causal == 1u); start < params.queries; start += OTHER) {"]
        loop = ["for (var j = li; j < OTHER; j += THREADS) {   // the tile's (lse, D) (past the end: masked)",
                "    let query = at.batch * params.queries + min(start + j, params.queries - 1u);",
                "    row_stats[2u * j] = saved[params.stats_at + 2u * query];",
                "    row_stats[2u * j + 1u] = saved[params.stats_at + 2u * query + 1u];",
                "}"]
        loop += _product("s", K, Q, nq, own, queries, tiles) + _product("dp", V, DOUT, nv, own, queries, tiles)
        for j in theirs:
            loop += [f"let lse{j} = row_stats[2u * (c + {j}u * GROUPS)];",
                     f"let delta{j} = row_stats[2u * (c + {j}u * GROUPS) + 1u];"]
            for i in mine:
                loop += [f"s{i}{j} = {_score(tile_row[j], own_row[i], f's{i}{j}')};",
                         f"s{i}{j} = select(0.0, exp(s{i}{j} - lse{j}), !is_masked(s{i}{j}));",
                         f"dp{i}{j} = s{i}{j} * (dp{i}{j} - delta{j});"]
        loop += _tile_fetch("dout", DOUT, queries, tiles) + _weights("s", "dout", tiles)
        loop += _accumulate("dv", mv, "dout", tiles)
        loop += _tile_fetch("q", Q, queries, tiles) + _weights("dp", "q", tiles)
        loop += _accumulate("dk", mq, "q", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += _store("dk", mq, "params.keys", "out", "params.head", "params.scale", tiles)
        body += _store("dv", mv, "params.keys", "dv", "params.value_head", "1.0", tiles)
    return body


def weights_body(entry, regs):
    """The body of the weights entry `entry` ("weights" or "weights_backward"; shaders/attention.wgsl says
    what each computes) for rows of up to regs * LANES keys, each thread's keys in named registers."""
    keys = [f"lane + {r}u * LANES" for r in range(regs)]
    body = ["let b = block(wg, nwg, params.queries, THREADS / LANES);",
            "let query = b.y + li / LANES;",
            "let inside = (b.x < params.batch) & (query < params.queries);",
            "let row = (b.x * params.queries + query) * params.keys;",
            "let end = weights_end(query, inside);   // the keys read",
            "let written = select(0u, params.keys, inside);",
            "let lane = li % LANES;",
            "let weights_at = params_offsets(0u) + row;"]
    if entry == "weights":
        body += ["let at = place(min(b.x, params.batch - 1u));",
                 "let mask_at = at.mask.start + query * at.mask.row;",
                 "var top = LOWEST;"]
        for r, key in enumerate(keys):
            scaled = f"params.scale * out[weights_at + {key}]"
            body += [f"var s{r} = f32_from_bits(MASKED);",
                     f"if ({key} < end) {{",
                     f"    s{r} = score(query, {key}, {scaled}, mask_at + ({key}) * at.mask.col);",
                     "}",
                     f"top = select(max(top, s{r}), top, is_masked(s{r}));"]
        body += ["top = lanes_max(li, top);", "var total = 0.0;"]
        for r in range(regs):
            body += [f"s{r} = select(exp(s{r} - top), 0.0, is_masked(s{r}));", f"total += s{r};"]
        body += ["total = lanes_sum(li, total);",
                 "let inverse = select(0.0, 1.0 / total, total > 0.0);"]
        written = [f"s{r} * inverse" for r in range(regs)]
    else:
        body += ["let p_at = params_offsets(1u) + row;", "var total = 0.0;"]
        for r, key in enumerate(keys):
            body += [f"var p{r} = 0.0;", f"var dp{r} = 0.0;",
                     f"if ({key} < end) {{", f"    p{r} = q[p_at + {key}];",
                     f"    dp{r} = out[weights_at + {key}];", "}",
                     f"total = fma(p{r}, dp{r}, total);"]
        body += ["let delta = lanes_sum(li, total);"]
        written = [f"params.scale * p{r} * (dp{r} - delta)" for r in range(regs)]
    for key, value in zip(keys, written):
        body += [f"if ({key} < written) {{", f"    out[weights_at + {key}] = {value};", "}"]
    return body
