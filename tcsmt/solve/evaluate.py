"""Evaluate a QF_BV pysmt term on many concrete inputs at once (numpy), by SMT-LIB's definitions.

Used to check the SMT encoding against the simulator on thousands of inputs:
each bit-vector node is computed for all inputs as unsigned integers in
[0, 2^w) (int64 arrays up to 62 bits, Python integers beyond), following the
SMT-LIB 2 semantics of each operator (modular bvadd/bvmul, bvshl and bvlshr
giving 0 for shifts >= w, bvashr filling with the sign bit, signed
comparisons, extract, sign/zero extension).
"""
from __future__ import annotations

import numpy as np
from pysmt import operators as op
from pysmt.fnode import FNode

_LIMIT = 62


def _width(node: FNode) -> int:
    return node.bv_width()


def _arr(x, w: int):
    if w > _LIMIT:
        return x.astype(object) if isinstance(x, np.ndarray) and x.dtype != object else x
    return x


def _signed(x, w: int):
    x = _arr(x, w)
    return np.where(x >= (1 << (w - 1)), x - (1 << w), x)


def _mask(w: int) -> int:
    return (1 << w) - 1


def evaluate(term: FNode, env: dict[FNode, np.ndarray]) -> np.ndarray:
    """Values of ``term`` for the symbol values in ``env`` (arrays of equal length)."""
    n = len(next(iter(env.values())))
    cache: dict[int, np.ndarray] = {}
    # iterative post-order walk (terms are deep DAGs)
    stack = [(term, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in cache:
            continue
        if not done:
            stack.append((node, True))
            for a in node.args():
                if id(a) not in cache:
                    stack.append((a, False))
            continue
        cache[key] = _eval_node(node, [cache[id(a)] for a in node.args()], env, n)
    return cache[id(term)]


def _eval_node(node: FNode, args: list, env, n: int):
    t = node.node_type()
    if t == op.SYMBOL:
        return np.asarray(env[node])
    if t == op.BV_CONSTANT:
        v = node.constant_value()
        return np.full(n, v, dtype=object if node.bv_width() > _LIMIT else np.int64)
    if t == op.BOOL_CONSTANT:
        return np.full(n, bool(node.constant_value()))
    if t == op.AND:
        out = args[0]
        for a in args[1:]:
            out = np.logical_and(out, a)
        return out
    if t == op.OR:
        out = args[0]
        for a in args[1:]:
            out = np.logical_or(out, a)
        return out
    if t == op.NOT:
        return np.logical_not(args[0])
    if t == op.IFF:
        return np.equal(args[0], args[1])
    if t == op.ITE:
        return np.where(args[0], args[1], args[2])
    if t == op.EQUALS:
        return np.equal(args[0], args[1])
    w: int = node.bv_width() if node.get_type().is_bv_type() else 0  # 0: a Boolean node (no width)
    if t in (op.BV_SLT, op.BV_SLE, op.BV_ULT, op.BV_ULE):
        aw = _width(node.arg(0))
        if t == op.BV_SLT:
            return np.less(_signed(args[0], aw), _signed(args[1], aw))
        if t == op.BV_SLE:
            return np.less_equal(_signed(args[0], aw), _signed(args[1], aw))
        if t == op.BV_ULT:
            return np.less(args[0], args[1])
        return np.less_equal(args[0], args[1])
    if t == op.BV_ADD:
        return np.bitwise_and(np.add(_arr(args[0], w + 1), args[1]), _mask(w))
    if t == op.BV_SUB:
        return np.bitwise_and(np.subtract(_arr(args[0], w + 1), args[1]), _mask(w))
    if t == op.BV_NEG:
        return np.bitwise_and(np.negative(_arr(args[0], w + 1)), _mask(w))
    if t == op.BV_MUL:
        return np.bitwise_and(np.multiply(_arr(args[0], 2 * w), _arr(args[1], 2 * w)), _mask(w))
    if t == op.BV_AND:
        return np.bitwise_and(args[0], args[1])
    if t == op.BV_OR:
        return np.bitwise_or(args[0], args[1])
    if t == op.BV_XOR:
        return np.bitwise_xor(args[0], args[1])
    if t == op.BV_NOT:
        return np.bitwise_xor(args[0], _mask(w))
    if t == op.BV_LSHL:
        x, s = _arr(args[0], w), args[1]
        big = s >= w
        s_c = np.where(big, 0, s)
        if isinstance(x, np.ndarray) and x.dtype == object:
            s_c = s_c.astype(object)
            kept = np.bitwise_and(x, np.left_shift(1, w - s_c) - 1)
        else:
            kept = np.bitwise_and(x, np.left_shift(np.int64(1), w - s_c) - 1)
        return np.where(big, 0, np.left_shift(kept, s_c))
    if t == op.BV_LSHR:
        x, s = _arr(args[0], w), args[1]
        big = s >= w
        s_c = np.where(big, 0, s)
        if isinstance(x, np.ndarray) and x.dtype == object:
            s_c = s_c.astype(object)
        return np.where(big, 0, np.right_shift(x, s_c))
    if t == op.BV_ASHR:
        x, s = _signed(args[0], w), args[1]
        s_c = np.minimum(s, w - 1)
        if isinstance(x, np.ndarray) and x.dtype == object:
            s_c = np.asarray(s_c).astype(object)
        return np.bitwise_and(np.right_shift(x, s_c), _mask(w))
    if t == op.BV_EXTRACT:
        lo = node.bv_extract_start()
        x = args[0]
        return np.bitwise_and(np.right_shift(x, lo), _mask(w)) if lo else np.bitwise_and(x, _mask(w))
    if t == op.BV_ZEXT:
        return _arr(args[0], w)
    if t == op.BV_SEXT:
        aw = _width(node.arg(0))
        x = _arr(args[0], w)
        return np.where(x >= (1 << (aw - 1)), x + ((1 << w) - (1 << aw)), x)
    if t == op.BV_CONCAT:
        bw = _width(node.arg(1))
        return np.bitwise_or(np.left_shift(_arr(args[0], w), bw), args[1])
    raise NotImplementedError(f"no evaluator for pysmt node type {op.op_to_str(t)}")
