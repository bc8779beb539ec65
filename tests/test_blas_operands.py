"""Every BLAS/LAPACK call in refsim/ gets canonical operands, so layout independence holds by construction.

BLAS picks its kernel by the operands' layout and by the CPU (and NumPy's matmul leaves BLAS for
its own loop on zero or unaligned strides), so ``X @ W`` with a Fortran-order or zero-stride ``W``
can round its last bit differently from the C-order call: on one CPU the two paths agree, on
another they do not. The hostile fuzz only sees the difference on a machine where the paths
round differently; this check sees it on every machine, from the source alone.

A BLAS call site is ``a @ b``, ``np.dot/matmul/inner/outer/tensordot/vdot``, ``x.dot(y)``,
``np.einsum(..., optimize=...)`` (einsum without ``optimize`` runs NumPy's own loop, never BLAS),
and any call into ``np.linalg`` or ``scipy.linalg``. Each array operand must be *canonical*, i.e.
its layout is refsim's and never the caller's:

* a call of ``refsim._validate.native_contiguous`` (a C-order, aligned, native copy), a fresh
  array from ``np.eye/zeros/ones/full/identity`` (in the order written there) or a constant;
* ``.T``, a subscript, ``.transpose/.reshape/.astype/.copy/.swapaxes`` of a canonical operand,
  an arithmetic expression of canonical operands and scalars, the result of a checked BLAS call;
* a local name whose nearest assignment above the use (in the same function) is canonical.

Call sites that cannot be written that way are listed in :data:`EXEMPT` with the reason their
result does not depend on the caller's layout; an entry that no longer matches fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import refsim

ROOT = Path(refsim.__file__).parent

#: np.<f> calls that hand their operands to BLAS
BLAS_FUNCS = {"dot", "matmul", "inner", "outer", "tensordot", "vdot"}
#: namespaces every call of which counts as BLAS/LAPACK
LINALG = ("np.linalg.", "numpy.linalg.", "scipy.linalg.")
#: fresh arrays: their layout (C, or order="F" for LAPACK) is written here, never the caller's
CONSTRUCTORS = {"np.eye", "np.zeros", "np.ones", "np.full", "np.identity"}
#: scalar factors (np.sqrt of a Python float, a NumPy scalar type)
SCALARS = {"float", "int", "np.sqrt", "np.float32", "np.float64", "math.sqrt"}
#: methods that keep a canonical array's layout refsim's
VIEWS = {"transpose", "reshape", "astype", "copy", "swapaxes"}

#: "path: function: call site" -> why its result does not depend on the caller's layout
EXEMPT = {
    "refsim/arith/integer_mma.py: mma_int: np.matmul(A.astype(np.int64), B.astype(np.int64))":
        "int64 operands: NumPy's own integer loop (no BLAS), exact integer sums",
    "refsim/cuda/mma.py: draw_operands: np.matmul(_from_bits(atype, A), _from_bits(btype, B))":
        "test operands refsim draws itself (fresh C-order arrays from its own generator)",
    "refsim/arith/wgmma.py: wgmma: np.matmul(A.astype(np.int64), B.astype(np.int64))":
        "int64 operands: NumPy's own integer loop (no BLAS), exact integer sums",
    "refsim/arith/block_scaled.py: _mxf4: na @ (1 - nb)":
        "int64 0/1 sign and nonzero masks: NumPy's integer loop (no BLAS), exact counts",
    "refsim/arith/block_scaled.py: _mxf4: (1 - na) @ nb":
        "int64 0/1 sign and nonzero masks: NumPy's integer loop (no BLAS), exact counts",
    "refsim/arith/block_scaled.py: _mxf4: na * nza @ ((1 - nb) * nzb)":
        "int64 0/1 sign and nonzero masks: NumPy's integer loop (no BLAS), exact counts",
    "refsim/arith/block_scaled.py: _mxf4: (1 - na) * nza @ (nb * nzb)":
        "int64 0/1 sign and nonzero masks: NumPy's integer loop (no BLAS), exact counts",
    "refsim/data/calibration.py: forward: q @ k.transpose(0, 2, 1)":
        "q, k: reshaped views of _linear's outputs, whose operands are canonical",
    "refsim/data/calibration.py: forward: probs @ v":
        "probs: softmax of q @ k.T computed here; v: a view of _linear's output",
    "refsim/emulator/atom_kernel.py: atom_group_gemm: a.q4[:, cols].astype(np.float32) @ w.q4[cols].astype(np.float32)":
        "int4 products in float32, |sum| <= 64 * group < 2**24 (else the slab path): exact in every order",
    "refsim/emulator/atom_kernel.py: atom_group_gemm: a.q8.astype(np.float64) @ w.q8.astype(np.float64)":
        "int8 products in float64 with sums below 2**53: exact in every order and kernel",
    "refsim/formats/atom_gemm.py: atom_gemm: qa[:, gi, :] @ qb[gi]":
        "int4 codes in float64, sums below 2**53: exact in every order and kernel",
    "refsim/formats/atom_gemm.py: atom_gemm: a.q8.astype(np.float64) @ w.q8.astype(np.float64)":
        "int8 products in float64 with sums below 2**53: exact in every order and kernel",
    "refsim/formats/marlin.py: reference_gemm: ai @ wi":
        "object arrays of Python ints: exact, no BLAS",
    "refsim/models/bert.py: BertModel._context: q @ k.transpose(0, 1, 3, 2)":
        "q, k: reshaped views of _lin's outputs, whose operands are canonical",
    "refsim/models/bert.py: BertModel._context: pr @ v":
        "pr: softmax of q @ k.T computed here; v: a view of _lin's output",
    "refsim/models/llama.py: LlamaModel._context: q @ k.transpose(0, 1, 3, 2)":
        "q, k: rotated, repeated views of _lin's outputs, whose operands are canonical",
    "refsim/models/llama.py: LlamaModel._context: pr @ v":
        "pr: softmax of q @ k.T computed here; v: a repeated view of _lin's output",
    "refsim/quant/atom.py: _atom_gptq_loop: Err1 @ U[i1:i2, i2:]":
        "Err1: an ascontiguousarray of the loop's own buffer; U: the factor refsim builds (Fortran order)",
    "refsim/quant/gptq.py: _upper_cholesky_of_inverse: scipy.linalg.lapack.strtri(Lt, lower=1, overwrite_c=1)":
        "Lt: spotrf's output on Hr, a fresh Fortran-order array filled here (LAPACK's own layout)",
    "refsim/quant/gptq.py: _column_loop_reference: U[:i1, rows].T @ Err[:i1]":
        "U: the factor refsim builds (Fortran order); Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop_reference: U[i1:col, col] @ Err[i1:col]":
        "U: the factor refsim builds (Fortran order); Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop: U[:i1, rows].T @ Err[:i1]":
        "U: the factor refsim builds (Fortran order); Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop: U[:i1, i1:i2].T @ Err[:i1]":
        "U: the factor refsim builds (Fortran order); Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop: U[i1:col, col] @ Err[i1:col]":
        "U: the factor refsim builds (Fortran order); Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop_reference: U[i1:i2, i2:].T @ Err[i1:i2]":
        "U: the factor refsim builds or gptq_quantize_float copies to Fortran order; Err: the loop's own C-order buffer",
    "refsim/quant/gptq.py: _column_loop: U[i1:i2, i2:].T @ Err[i1:i2]":
        "U: the factor refsim builds or gptq_quantize_float copies to Fortran order; Err: the loop's own C-order buffer",
    "refsim/report/sections/foundation.py: _workload: rng.standard_normal((t, k)) @ mix":
        "the report's own random data (fresh C-order arrays)",
    "refsim/report/sections/foundation.py: _rtn_error: np.linalg.norm(uq.dequantize() - W)":
        "the report's own data and dequantized weights",
    "refsim/report/sections/foundation.py: _rtn_error: np.linalg.norm(W)":
        "the report's own data",
    "refsim/report/sections/mixed_2_4_16.py: _problem_cached: X.T @ X":
        "the report's own random data",
    "refsim/testing/cases/atom.py: AtomCases.linear: np.abs(a_q4.astype(np.float64)) @ np.abs(w_q4.astype(np.float64))":
        "a bound on integer codes in float64, sums below 2**53: exact in every order and kernel",
    "refsim/testing/cases/atom.py: AtomCases.linear: np.abs(a_q8.astype(np.float64)) @ np.abs(w_q8.astype(np.float64))":
        "a bound on integer codes in float64, sums below 2**53: exact in every order and kernel",
    "refsim/testing/cases/mixed_2_4_16.py: lowrank_hinv_diag: np.linalg.solve(c * np.eye(r) + U.T @ U, U.T)":
        "a test case's own random factor U (a fresh C-order array)",
    "refsim/testing/cases/mixed_2_4_16.py: lowrank_hinv_diag: U.T @ U":
        "a test case's own random factor U (a fresh C-order array)",
    "refsim/testing/validate.py: _mixed_inputs: X.T @ X":
        "refsim validate's own random data",
}


def dotted(node: ast.AST) -> str:
    """``np.linalg.norm`` for the attribute chain np.linalg.norm; '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def blas_operands(node: ast.AST) -> list[ast.expr] | None:
    """The array operands of a BLAS/LAPACK call site, or None when ``node`` is not one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return [node.left, node.right]
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
        return [node.target, node.value]
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func)
    args = [a for a in node.args if not isinstance(a, ast.Constant)]
    kwargs = [k.value for k in node.keywords if not isinstance(k.value, ast.Constant)]
    if name in {f"np.{f}" for f in BLAS_FUNCS} | {f"numpy.{f}" for f in BLAS_FUNCS}:
        return args + kwargs
    if isinstance(node.func, ast.Attribute) and node.func.attr == "dot" and not name.startswith(("np.", "numpy.")):
        return [node.func.value, *args]
    if name in ("np.einsum", "numpy.einsum"):
        optimize = [k.value for k in node.keywords if k.arg == "optimize"]
        if optimize and not (isinstance(optimize[0], ast.Constant) and optimize[0].value is False):
            return [a for a in node.args[1:] if not isinstance(a, ast.Constant)]
        return None
    if name.startswith(LINALG):
        return args + kwargs
    return None


class Scope:
    """One function's assignments, to follow a name back to the expression it holds."""

    def __init__(self, func: ast.AST | None):
        self.assigned: dict[str, list[tuple[int, ast.expr | None]]] = {}
        for node in ast.walk(func) if func is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    self._bind(t, node.value, node.lineno)
            elif isinstance(node, (ast.For, ast.comprehension, ast.With, ast.withitem)):
                for t in ([node.target] if hasattr(node, "target") else [getattr(node, "optional_vars", None)]):
                    self._bind(t, None, getattr(t, "lineno", 0))  # loop and with targets: unknown

    def _bind(self, target, value, line):
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append((line, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._bind(t, value.elts[i], line)
                elif isinstance(value, (ast.GeneratorExp, ast.ListComp)):
                    self._bind(t, value.elt, line)
                else:
                    self._bind(t, None, line)

    def before(self, name: str, line: int) -> tuple[int, ast.expr | None] | None:
        earlier = [a for a in self.assigned.get(name, []) if a[0] < line]
        return max(earlier, key=lambda a: a[0]) if earlier else None


def canonical(expr: ast.expr | None, scope: Scope, line: int, depth: int = 0) -> bool:
    """Whether ``expr`` (used at ``line``) is an operand whose layout is refsim's (module docstring)."""
    if expr is None or depth > 20:
        return False
    again = lambda e, at=line: canonical(e, scope, at, depth + 1)  # noqa: E731
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call):
        name = dotted(expr.func)
        if name.split(".")[-1] == "native_contiguous" or name in CONSTRUCTORS or name in SCALARS:
            return True
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in VIEWS and not name.startswith(("np.", "numpy.")):
            return again(expr.func.value)
        operands = blas_operands(expr)
        return operands is not None and all(again(o) for o in operands)
    if isinstance(expr, ast.Attribute) and expr.attr == "T":
        return again(expr.value)
    if isinstance(expr, ast.Subscript):
        return again(expr.value)
    if isinstance(expr, ast.BinOp):
        return again(expr.left) and again(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return again(expr.operand)
    if isinstance(expr, ast.IfExp):
        return again(expr.body) and again(expr.orelse)
    if isinstance(expr, ast.Name):
        found = scope.before(expr.id, line)
        return found is not None and canonical(found[1], scope, found[0], depth + 1)
    return False


def call_sites(source: str, path: str) -> list[tuple[str, bool]]:
    """``("path: function: site", canonical?)`` for every BLAS/LAPACK call site in ``source``."""
    tree = ast.parse(source)
    out = []

    def visit(node, qualname, func):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{qualname}.{child.name}" if qualname else child.name
                inner = child if not isinstance(child, ast.ClassDef) else func
                if isinstance(child, ast.ClassDef) or func is None:
                    visit(child, name, inner)
                else:  # a nested function belongs to the outer one's entry
                    visit(child, qualname, child)
                continue
            operands = blas_operands(child)
            if operands is not None:
                scope = Scope(func)
                ok = all(canonical(o, scope, child.lineno) for o in operands)
                out.append((f"{path}: {qualname or '<module>'}: {ast.unparse(child)}", ok))
            visit(child, qualname, func)

    visit(tree, "", None)
    return out


def linalg_imports(source: str) -> list[str]:
    """``from scipy.linalg import ...`` / ``import numpy.linalg as la`` hide call sites from the check."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and "linalg" in node.module.split("."):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and any(a.name == "linalg" for a in node.names):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Import) and any("linalg" in a.name and a.asname for a in node.names):
            found.append(ast.unparse(node))
    return found


def package_sites() -> list[tuple[str, bool]]:
    sites = []
    for p in sorted(ROOT.rglob("*.py")):
        sites += call_sites(p.read_text(encoding="utf-8"), p.relative_to(ROOT.parent).as_posix())
    return sites


def test_every_blas_operand_in_refsim_is_canonical_or_exempt_with_a_reason():
    unchecked = [site for site, ok in package_sites() if not ok and site not in EXEMPT]
    assert not unchecked, ("BLAS/LAPACK call sites whose operands may keep the caller's layout (pass them "
                           "through refsim._validate.native_contiguous, or add a reasoned EXEMPT entry):\n  "
                           + "\n  ".join(unchecked))


def test_every_exemption_still_names_an_unchecked_call_site():
    unchecked = {site for site, ok in package_sites() if not ok}
    stale = sorted(set(EXEMPT) - unchecked)
    assert not stale, "EXEMPT entries matching no unchecked call site (delete them):\n  " + "\n  ".join(stale)


def test_no_module_imports_linalg_names_past_the_check():
    found = {p.relative_to(ROOT.parent).as_posix(): linalg_imports(p.read_text(encoding="utf-8"))
             for p in sorted(ROOT.rglob("*.py"))}
    assert not {k: v for k, v in found.items() if v}


def test_the_check_flags_caller_layouts_and_passes_canonical_copies():
    src = '''
def bad(X, W):
    ref = X.astype(np.float64) @ W.astype(np.float64)
    return np.linalg.norm(ref)

def good(X, W, s):
    X64, W64 = (native_contiguous(a, np.float64) for a in (X, W))
    ref = X64 @ W64
    Xs = X64 if s is None else X64 / native_contiguous(s)
    ref = ref * np.sqrt(2.0)
    return np.linalg.norm(ref - Xs @ native_contiguous(W).T) / np.linalg.norm(ref)

def reassigned(X):
    X = native_contiguous(X)
    X = X + other
    return X @ X.T

def blas_via_einsum(x, w):
    a = np.einsum("tk,nk->tn", x, w)                      # NumPy's own loop: not a BLAS site
    return np.einsum("tk,nk->tn", x, w, optimize=True)    # may reach BLAS
'''
    got = dict(call_sites(src, "m.py"))
    assert got == {
        "m.py: bad: X.astype(np.float64) @ W.astype(np.float64)": False,
        "m.py: bad: np.linalg.norm(ref)": False,
        "m.py: good: X64 @ W64": True,
        "m.py: good: np.linalg.norm(ref - Xs @ native_contiguous(W).T)": True,
        "m.py: good: Xs @ native_contiguous(W).T": True,
        "m.py: good: np.linalg.norm(ref)": True,
        "m.py: reassigned: X @ X.T": False,
        "m.py: blas_via_einsum: np.einsum('tk,nk->tn', x, w, optimize=True)": False,
    }
    assert linalg_imports("from scipy.linalg import cholesky\nimport numpy.linalg as la\nimport numpy as np\n") == [
        "from scipy.linalg import cholesky", "import numpy.linalg as la"]
