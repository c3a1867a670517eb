"""The scores of a factor model, ``score(u, i) = sum_f U[u, f] * V[i, f]``, computed one way wherever
they are needed: full rankings by tiles of users (:func:`score_tile`, read by
:func:`recsys_eval.recommend.topk.top_k_factors`), score blocks (:func:`factor_scores`) and listed
pairs, the sampled and 1R candidates (:func:`pair_scores`).

Every score is one float32 sum in a fixed order (docs/CONVENTIONS.md#seeds-and-reproducibility)::

    s = 0;  for f = 0 .. K-1:  s = s + U[u, f] * V[i, f]

each product and each sum rounded to float32 (IEEE 754 multiply, then add: no fused multiply-add,
no reassociation). So a score's bits depend on the two factor rows alone: not on the user's
neighbours in a tile, the tile size, the range of users a memory budget or a Spark partition
gives, the thread count, nor the machine (float32 multiply and add round the same on every IEEE
CPU, in vector lanes or not, subnormals kept as numpy and numba keep them). A BLAS product
(OpenBLAS ``sgemm``) did not have this property: its kernels for a block's edge rows sum in
another order, so a user's last bits moved with its place in the tile (up to 1e-5 in a score).

Speed: blocked as a BLAS kernel is. The item factors are packed in panels of :data:`W_ITEMS` items,
``packed[p, f, w] = V[p * W_ITEMS + w, f]`` (zeros past the last item), so that one factor of a
panel is two 8-float vectors read contiguously; :data:`R_USERS` users' scores of a panel, 12
vectors, stay in registers through the loop over factors, each lane one score summed in the order
above. The kernel (:func:`_panel_block`) is written in LLVM IR through a numba intrinsic: numba's
own loops leave such accumulators in memory (LLVM vectorises only innermost loops, and would
reassociate the sum over factors to vectorise it). Users are taken :data:`R_USERS` at a time (the
last block padded with zero rows) and panels :data:`PANELS_PER_PASS` at a time (256 KB at 64
factors, reused from cache by every user block of a tile); a panel or block that overruns the
scores' edge is computed by the same kernel into a scratch block and its valid part copied.
Measured (benchmarks/bench_factor_scores.py at ML-25M size, 162,541 users x 59,047 items x 64
factors, 2 threads, a 2-core machine): 86.9 GFLOP/s against 43.8 for the BLAS tiles (whose every
tile allocated its scores afresh), top-100 of every user 28.8 s against 44.4 s.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from recsys_eval.core.chunks import chunk_bounds, run_chunks

#: Users per register block and items per panel (two vectors of 8 float32): 6 x 2 accumulator
#: vectors, the most that fit beside the operands in 16 vector registers.
R_USERS = 6
LANES = 8
W_ITEMS = 2 * LANES
#: Panels of one pass over a tile's user blocks (64 x 16 items x 64 factors x 4 B = 256 KB).
PANELS_PER_PASS = 64
#: Users per tile of :func:`factor_scores` (per thread).
TILE_USERS = 16 * R_USERS


@intrinsic
def _panel_block(typingctx, users, packed, panel, out, row, col):
    """``out[row + r, col + w] = sum_f users[r, f] * packed[panel, f, w]`` for r < R_USERS and
    w < W_ITEMS, summed over f in order in float32 (fmul then fadd, no flags that would let LLVM
    fuse or reorder them). ``users`` is (R_USERS, K) and ``out`` 2-d, both C-contiguous float32;
    the caller keeps the written block inside ``out``."""
    if any(not isinstance(a, types.Array) or a.layout != "C" or a.dtype != types.float32 for a in (users, packed, out)):
        return None  # the row strides are read from the shapes
    sig = types.void(users, packed, panel, out, row, col)

    def codegen(context, builder, signature, args):
        u_arr = context.make_array(signature.args[0])(context, builder, args[0])
        p_arr = context.make_array(signature.args[1])(context, builder, args[1])
        o_arr = context.make_array(signature.args[3])(context, builder, args[3])
        panel_v, row_v, col_v = args[2], args[4], args[5]
        i64, i32, f32 = ir.IntType(64), ir.IntType(32), ir.FloatType()
        vec = ir.VectorType(f32, LANES)
        vec_ptr = vec.as_pointer()

        def const(x):
            return ir.Constant(i64, x)

        n_factors = builder.extract_value(u_arr.shape, 1)
        out_width = builder.extract_value(o_arr.shape, 1)
        zero = ir.Constant(vec, [0.0] * LANES)
        entry = builder.block
        loop = builder.append_basic_block("factor_loop")
        done = builder.append_basic_block("factor_done")
        builder.cbranch(builder.icmp_signed(">", n_factors, const(0)), loop, done)

        builder.position_at_end(loop)
        f = builder.phi(i64)
        acc = [[builder.phi(vec) for _ in range(2)] for _ in range(R_USERS)]
        # packed[panel, f, :]: 16 contiguous floats
        base = builder.mul(builder.add(builder.mul(panel_v, n_factors), f), const(W_ITEMS))
        items = [builder.load(builder.bitcast(builder.gep(p_arr.data, [builder.add(base, const(LANES * v))]), vec_ptr),
                              align=4) for v in range(2)]
        summed = []
        for r in range(R_USERS):
            scalar = builder.load(builder.gep(u_arr.data, [builder.add(builder.mul(const(r), n_factors), f)]))
            splat = builder.shuffle_vector(builder.insert_element(ir.Constant(vec, ir.Undefined), scalar,
                                                                  ir.Constant(i32, 0)),
                                           ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))
            summed.append([builder.fadd(acc[r][v], builder.fmul(splat, items[v])) for v in range(2)])
        f_next = builder.add(f, const(1))
        latch = builder.block
        f.add_incoming(const(0), entry)
        f.add_incoming(f_next, latch)
        for r in range(R_USERS):
            for v in range(2):
                acc[r][v].add_incoming(zero, entry)
                acc[r][v].add_incoming(summed[r][v], latch)
        builder.cbranch(builder.icmp_signed("<", f_next, n_factors), loop, done)

        builder.position_at_end(done)
        final = [[builder.phi(vec) for _ in range(2)] for _ in range(R_USERS)]
        for r in range(R_USERS):
            for v in range(2):
                final[r][v].add_incoming(zero, entry)
                final[r][v].add_incoming(summed[r][v], latch)
        for r in range(R_USERS):
            start = builder.add(builder.mul(builder.add(row_v, const(r)), out_width), col_v)
            for v in range(2):
                target = builder.gep(o_arr.data, [builder.add(start, const(LANES * v))])
                builder.store(final[r][v], builder.bitcast(target, vec_ptr), align=4)
        return context.get_dummy_value()

    return sig, codegen


def pack_items(item_factors_t: np.ndarray) -> np.ndarray:
    """The (factors, items) item factors as float32 panels ``(ceil(items / W_ITEMS), factors,
    W_ITEMS)``: ``packed[p, f, w] = item_factors_t[f, p * W_ITEMS + w]``, zeros past the last item."""
    n_factors, n_items = item_factors_t.shape
    n_panels = -(-n_items // W_ITEMS)
    padded = np.zeros((n_factors, n_panels * W_ITEMS), dtype=np.float32)
    padded[:, :n_items] = item_factors_t
    return np.ascontiguousarray(padded.reshape(n_factors, n_panels, W_ITEMS).transpose(1, 0, 2))


@numba.njit(cache=True, nogil=True)
def score_tile(user_factors, rows, packed, out, blocks, edge):
    """``out[r, i] = score(rows[r], i)`` for r < len(rows) and every item i < out.shape[1] (the
    model's items), ``rows`` being rows of ``user_factors``. Work arrays (float32): ``blocks``, at
    least (ceil(len(rows) / R_USERS), R_USERS, factors), the users' rows in register blocks, and
    ``edge``, (R_USERS, W_ITEMS). Each score is the module's fixed-order float32 sum, whatever the tile."""
    n = len(rows)
    n_factors = packed.shape[1]
    n_items = out.shape[1]
    n_panels = packed.shape[0]
    n_blocks = (n + R_USERS - 1) // R_USERS
    for b in range(n_blocks):
        for q in range(R_USERS):
            r = b * R_USERS + q
            for f in range(n_factors):
                blocks[b, q, f] = np.float32(user_factors[rows[r], f]) if r < n else np.float32(0.0)
    for p0 in range(0, n_panels, PANELS_PER_PASS):
        for b in range(n_blocks):
            first = b * R_USERS
            n_rows = min(R_USERS, n - first)
            for p in range(p0, min(p0 + PANELS_PER_PASS, n_panels)):
                col = p * W_ITEMS
                if n_rows == R_USERS and col + W_ITEMS <= n_items:
                    _panel_block(blocks[b], packed, np.int64(p), out, np.int64(first), np.int64(col))
                else:
                    _panel_block(blocks[b], packed, np.int64(p), edge, np.int64(0), np.int64(0))
                    for q in range(n_rows):
                        for w in range(min(W_ITEMS, n_items - col)):
                            out[first + q, col + w] = edge[q, w]


def factor_scores(user_factors: np.ndarray, packed: np.ndarray, rows: np.ndarray, n_items: int) -> np.ndarray:
    """float32 scores (len(rows), n_items) of the users at ``rows`` of ``user_factors`` for every item
    (``packed`` from :func:`pack_items`), tiles of users on numba's threads."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.empty((len(rows), n_items), dtype=np.float32)
    n_tiles = -(-len(rows) // TILE_USERS)
    run_chunks(_factor_scores_chunk, chunk_bounds(n_tiles), user_factors, rows, packed, out)
    return out


@numba.njit(cache=True, nogil=True)
def _factor_scores_chunk(t_lo, t_hi, user_factors, rows, packed, out):
    """:func:`factor_scores` for the tiles ``t_lo:t_hi``."""
    n_blocks = TILE_USERS // R_USERS
    blocks = np.zeros((n_blocks, R_USERS, packed.shape[1]), dtype=np.float32)
    edge = np.zeros((R_USERS, W_ITEMS), dtype=np.float32)
    for t in range(t_lo, t_hi):
        lo, hi = t * TILE_USERS, min((t + 1) * TILE_USERS, len(rows))
        score_tile(user_factors, rows[lo:hi], packed, out[lo:hi], blocks, edge)


def pair_scores(user_factors: np.ndarray, item_factors: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``score(rows[p], cols[p])`` for every p, from the (users, factors) and (items, factors)
    matrices without gathering them: the same fixed-order float32 sum as a tile's lanes, so a
    listed pair scores what full ranking gives it, to the bit."""
    out = np.empty(len(rows), dtype=np.float32)
    run_chunks(_pair_scores_chunk, chunk_bounds(len(rows)), user_factors, item_factors, rows, cols, out)
    return out


@numba.njit(cache=True, nogil=True)
def _pair_scores_chunk(lo, hi, user_factors, item_factors, rows, cols, out):
    """:func:`pair_scores` for the pairs ``lo:hi``."""
    for p in range(lo, hi):
        u = user_factors[rows[p]]
        v = item_factors[cols[p]]
        total = np.float32(0.0)
        for f in range(len(u)):
            total = total + np.float32(u[f]) * np.float32(v[f])
        out[p] = total
