"""Duration interpolation (after BigSim's log-rewriting tool): rewrite node durations from a model.

Two models, as BigSim's `rewritelog`:

1. a constant factor (`time_dilation_factor`): every compute node's duration times F;
2. a least-squares fit of duration over user parameters, e.g. `c0 + c1*p1 + c2*p1^2 + c3*p2`
   (BigSim's example), learned from timing samples: `TRACEBIGSIM:` lines, a CSV of
   (name, params..., duration), or the nodes of another trace (parameters `flops` = `num_ops` and
   `bytes` = `tensor_size`). One model is fitted per sample name; nodes whose name (or operator
   class) has a model and whose parameters are known get the model's duration, all other compute
   nodes are scaled by the default factor, as BigSim does.

A model expression may use coefficients `c<k>`, parameters `p<k>` (1-based, BigSim's numbering)
or parameter names (`flops`, `bytes`, CSV header names), numbers, `+ - * / ^ **`, parentheses and
`log`, `sqrt`, `exp`, `abs` of parameter-only terms. It must be linear in the coefficients (a
coefficient may multiply a parameter term, never another coefficient), which is what makes the fit
a linear least-squares problem. The expression is parsed by the small parser below; nothing is
ever passed to `eval`.

The fit reports coefficients, R² and χ² (sum of squared residuals, as GSL's `gsl_multifit_linear`
returns it for unit weights, which is what BigSim printed). Durations are fitted in µs.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from chakra.errors import InputError, TraceFormatError, excerpt
from chakra.io import input_file_errors
from chakra.schema import NodeType, pb
from chakra.schema.attrs import get_attr
from chakra.trace import Trace

# ----------------------------------------------------------------------------- expression parser

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*|[-+*/^(),]))")
_FUNCS = {"log": np.log, "sqrt": np.sqrt, "exp": np.exp, "abs": np.abs}
_COEF = re.compile(r"^c(\d+)$")
_PARAM = re.compile(r"^p(\d+)$")


class ModelError(InputError):
    """A model expression that does not parse, or is not linear in its coefficients."""


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Call:
    func: str
    arg: Any


@dataclass(frozen=True)
class Bin:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Neg:
    arg: Any


def tokenize(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ModelError(f"model {excerpt(text)}: unexpected character {text[pos:].strip()[:1]!r} at {pos}")
        num, ident, op = m.groups()
        out.append(("num", num) if num else ("id", ident) if ident else ("op", "^" if op == "**" else op))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    def peek(self) -> Optional[tuple[str, str]]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: Optional[str] = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = repr(value) if value else "more input"
            got = repr(tok[1]) if tok else "the end"
            raise ModelError(f"model {excerpt(self.text)}: expected {want}, found {got}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        if not self.toks:
            raise ModelError("empty model expression")
        node = self.expr()
        if self.peek() is not None:
            raise ModelError(f"model {excerpt(self.text)}: unexpected {excerpt(self.peek()[1])}")  # type: ignore[index]
        return node

    def expr(self) -> Any:
        return self._left_assoc(("+", "-"), self.term)

    def term(self) -> Any:
        return self._left_assoc(("*", "/"), self.unary)

    def _left_assoc(self, ops: tuple[str, ...], operand: Callable[[], Any]) -> Any:
        """`operand (op operand)*` for the binary operators `ops`, folded to the left."""
        node = operand()
        while (tok := self.peek()) is not None and tok[1] in ops:
            self.take()
            node = Bin(tok[1], node, operand())
        return node

    def unary(self) -> Any:
        tok = self.peek()
        if tok is not None and tok[1] in ("-", "+"):
            self.take()
            arg = self.unary()
            return Neg(arg) if tok[1] == "-" else arg
        return self.power()

    def power(self) -> Any:
        base = self.atom()
        tok = self.peek()
        if tok is not None and tok[1] == "^":
            self.take()
            return Bin("^", base, self.unary())
        return base

    def atom(self) -> Any:
        kind, value = self.take()
        if kind == "num":
            return Num(float(value))
        if kind == "id":
            nxt = self.peek()
            if nxt is not None and nxt[1] == "(":
                if value not in _FUNCS:
                    raise ModelError(
                        f"model {excerpt(self.text)}: unknown function {excerpt(value)} (have {', '.join(_FUNCS)})"
                    )
                self.take("(")
                arg = self.expr()
                self.take(")")
                return Call(value, arg)
            return Var(value)
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        raise ModelError(f"model {excerpt(self.text)}: unexpected {excerpt(value)}")


# A linear form: {None: constant part, coefficient name: multiplier}, each value an array over samples.
Form = dict[Optional[str], np.ndarray]


class Model:
    """A parsed model expression, linear in its coefficients `c<k>`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = _Parser(text).parse()
        self.coefs = sorted(_coef_names(self.tree), key=lambda c: int(c[1:]))
        self.params = sorted(_var_names(self.tree) - set(self.coefs))
        if not self.coefs:
            raise ModelError(f"model {excerpt(text)} has no coefficients (c0, c1, ...) to fit")
        # Check linearity once, on dummy data, so errors surface before any sample is read.
        self.form({p: np.ones(1) for p in self.params})

    def form(self, env: Mapping[str, np.ndarray]) -> Form:
        return _eval(self.tree, env, self.text)

    def design(self, env: Mapping[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
        """(X with one column per coefficient, offset) such that value = offset + X @ c."""
        f = self.form(env)
        cols = [np.broadcast_to(np.asarray(f.get(c, 0.0), dtype=float), (n,)) for c in self.coefs]
        offset = np.broadcast_to(np.asarray(f.get(None, 0.0), dtype=float), (n,))
        return np.column_stack(cols) if cols else np.zeros((n, 0)), offset

    def __repr__(self) -> str:
        return f"Model({self.text!r})"


def _coef_names(node: Any) -> set[str]:
    return {v for v in _var_names(node) if _COEF.match(v)}


def _var_names(node: Any) -> set[str]:
    if isinstance(node, Var):
        return {node.name}
    if isinstance(node, Bin):
        return _var_names(node.left) | _var_names(node.right)
    if isinstance(node, (Neg, Call)):
        return _var_names(node.arg)
    return set()


def _const(f: Form) -> bool:
    return set(f) <= {None}


def _eval(node: Any, env: Mapping[str, np.ndarray], text: str) -> Form:
    if isinstance(node, Num):
        return {None: np.asarray(node.value)}
    if isinstance(node, Var):
        if _COEF.match(node.name):
            return {node.name: np.asarray(1.0)}
        if node.name not in env:
            raise ModelError(f"model {excerpt(text)}: unknown parameter {excerpt(node.name)}")
        return {None: np.asarray(env[node.name], dtype=float)}
    if isinstance(node, Neg):
        return {k: -v for k, v in _eval(node.arg, env, text).items()}
    if isinstance(node, Call):
        arg = _eval(node.arg, env, text)
        if not _const(arg):
            raise ModelError(f"model {excerpt(text)}: {node.func}() of a coefficient is not linear")
        with np.errstate(all="ignore"):
            return {None: _FUNCS[node.func](arg.get(None, np.asarray(0.0)))}
    a = _eval(node.left, env, text)
    b = _eval(node.right, env, text)
    if node.op in ("+", "-"):
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + (v if node.op == "+" else -v)
        return out
    if node.op == "*":
        if _const(a):
            s = a.get(None, np.asarray(0.0))
            return {k: s * v for k, v in b.items()}
        if _const(b):
            s = b.get(None, np.asarray(0.0))
            return {k: v * s for k, v in a.items()}
        raise ModelError(f"model {excerpt(text)}: a product of two coefficient terms is not linear")
    if node.op == "/":
        if not _const(b):
            raise ModelError(f"model {excerpt(text)}: dividing by a coefficient term is not linear")
        d = b.get(None, np.asarray(0.0))
        with np.errstate(all="ignore"):
            return {k: v / d for k, v in a.items()}
    if node.op == "^":
        if not (_const(a) and _const(b)):
            raise ModelError(f"model {excerpt(text)}: powers of coefficient terms are not linear")
        with np.errstate(all="ignore"):
            return {None: np.power(a.get(None, np.asarray(0.0)), b.get(None, np.asarray(0.0)))}
    raise ModelError(f"model {excerpt(text)}: bad operator {excerpt(node.op)}")


# ----------------------------------------------------------------------------- samples


@dataclass
class Samples:
    """Timing samples of one name: parameters by name (arrays) and durations in µs."""

    name: str
    params: dict[str, list[float]] = field(default_factory=dict)
    duration_us: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.duration_us)


def _add(groups: dict[str, Samples], name: str, params: Mapping[str, float], dur_us: float) -> None:
    s = groups.get(name)
    if s is None:
        s = groups[name] = Samples(name)
    n = len(s)
    for k, v in params.items():
        col = s.params.setdefault(k, [math.nan] * n)
        col.append(float(v))
    for col in s.params.values():
        if len(col) == n:
            col.append(math.nan)
    s.duration_us.append(float(dur_us))


def samples_from_bigsim(path: Union[str, Path]) -> dict[str, Samples]:
    """TRACEBIGSIM lines (via the BigSim converter's reader): params p1..pN, PAPI counters
    papi1..papiK, time in s -> µs."""
    from chakra.converters.bigsim import read_timing_samples

    groups: dict[str, Samples] = {}
    for s in read_timing_samples(path):
        if not getattr(s, "has_time", not math.isnan(s.time_s)):
            continue
        params = {f"p{i}": v for i, v in enumerate(s.params, 1)}
        params.update({f"papi{i}": float(v) for i, v in enumerate(getattr(s, "papi", []) or [], 1)})
        _add(groups, s.name, params, s.time_s * 1e6)
    if not groups:
        raise TraceFormatError(path, "no TRACEBIGSIM line with a time: nothing to fit")
    return groups


_DUR_UNITS = {"duration_s": 1e6, "time_s": 1e6, "duration_ms": 1e3, "duration_ns": 1e-3, "duration_us": 1.0}


def samples_from_csv(path: Union[str, Path]) -> dict[str, Samples]:
    """CSV rows `name, param..., duration`. A header row names the parameters (else p1..pN) and
    may give the duration unit by its last column (`duration_s`, `time_s`, `duration_ms`,
    `duration_ns`; anything else means µs)."""
    path = Path(path)
    try:
        with input_file_errors(path, "CSV file"):
            text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    rows = [r for r in csv.reader(text.splitlines()) if r and not r[0].lstrip().startswith("#")]
    if not rows:
        raise TraceFormatError(path, "no rows")
    names: Optional[list[str]] = None
    scale = 1.0
    first = 0
    try:
        [float(x) for x in rows[0][1:]]
    except ValueError:
        header = [h.strip() for h in rows[0]]
        names = header[1:-1]
        scale = _DUR_UNITS.get(header[-1].lower(), 1.0)
        first = 1
    groups: dict[str, Samples] = {}
    width = None
    for lineno, row in enumerate(rows[first:], first + 1):
        if len(row) < 2:
            raise TraceFormatError(path, "need at least a name and a duration", line=lineno)
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise TraceFormatError(path, f"{len(row)} columns, expected {width}", line=lineno)
        try:
            vals = [float(x) for x in row[1:]]
        except ValueError as exc:
            raise TraceFormatError(path, f"not a number: {exc}", line=lineno) from None
        pnames = names if names is not None else [f"p{i}" for i in range(1, len(vals))]
        _add(groups, row[0].strip(), dict(zip(pnames, vals[:-1])), vals[-1] * scale)
    return groups


def node_params(node: pb.Node) -> dict[str, float]:
    """Model parameters a trace node offers: flops (num_ops), bytes (tensor_size), and p1..pN attrs."""
    out: dict[str, float] = {}
    flops = get_attr(node, "num_ops", None)
    if flops is not None:
        out["flops"] = float(flops)
    size = get_attr(node, "tensor_size", None)
    if size is None:
        size = get_attr(node, "comm_size", None)
    if size is not None:
        out["bytes"] = float(size)
    for a in node.attr:
        if _PARAM.match(a.name):
            v = get_attr(node, a.name, None)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[a.name] = float(v)
    if "p1" not in out and "flops" in out:
        out["p1"] = out["flops"]
    if "p2" not in out and "bytes" in out:
        out["p2"] = out["bytes"]
    return out


def node_key(node: pb.Node) -> str:
    """The name a node's model is looked up by: its operator class (see chakra.analysis.op_class)."""
    from chakra.analysis import op_class

    return op_class(node)


def samples_from_traces(traces: Sequence[Trace]) -> dict[str, Samples]:
    """One sample per compute node with a positive duration and at least one parameter."""
    groups: dict[str, Samples] = {}
    for t in traces:
        for n in t.nodes:
            if n.type != NodeType.COMP_NODE or n.duration_micros <= 0:
                continue
            ps = node_params(n)
            if ps:
                _add(groups, node_key(n), ps, n.duration_micros)
    if not groups:
        raise InputError("no compute node with num_ops or tensor_size and a duration: nothing to fit")
    return groups


def load_samples(path: Union[str, Path]) -> dict[str, Samples]:
    """Samples from a TRACEBIGSIM file, a CSV, or a trace / PREFIX (detected by content)."""
    p = Path(path)
    if p.is_file():
        with input_file_errors(p, "samples file"), open(p, "rb") as fh:
            head = fh.read(65536)
        if b"TRACEBIGSIM" in head:
            return samples_from_bigsim(p)
        if p.suffix.lower() in (".csv", ".txt", ".tsv"):
            return samples_from_csv(p)
    from chakra.io import read_traces

    return samples_from_traces(read_traces([str(path)]))


# ----------------------------------------------------------------------------- fitting


@dataclass
class Fit:
    name: str
    model: Model
    coefs: dict[str, float]
    n: int
    r2: Optional[float]
    chi2: float
    rank: int

    @property
    def dof(self) -> int:
        return max(0, self.n - len(self.coefs))

    def predict(self, params: Mapping[str, float]) -> Optional[float]:
        """Duration (µs) for one parameter set; None when a parameter is missing or not finite."""
        if any(p not in params for p in self.model.params):
            return None
        env = {p: np.asarray([params[p]], dtype=float) for p in self.model.params}
        x, off = self.model.design(env, 1)
        c = np.array([self.coefs[k] for k in self.model.coefs])
        v = float(off[0] + x[0] @ c)
        return v if math.isfinite(v) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model.text,
            "samples": self.n,
            "coefficients": self.coefs,
            "r2": self.r2,
            "chi2": self.chi2,
            "reduced_chi2": self.chi2 / self.dof if self.dof else None,
            "rank": self.rank,
            "units": "us",
        }


def fit(samples: Samples, model: Model) -> Optional[Fit]:
    """Least-squares coefficients of `model` for one sample group; None if no usable sample.

    Samples missing a parameter the model uses, or whose terms are not finite, are dropped.
    """
    y = np.asarray(samples.duration_us, dtype=float)
    env = {}
    for p in model.params:
        if p not in samples.params:
            return None
        env[p] = np.asarray(samples.params[p], dtype=float)
    x, off = model.design(env, len(y))
    ok = np.isfinite(y) & np.isfinite(off) & np.all(np.isfinite(x), axis=1)
    if not ok.any():
        return None
    x, off, y = x[ok], off[ok], y[ok]
    target = y - off
    c, _res, rank, _sv = np.linalg.lstsq(x, target, rcond=None)
    resid = target - x @ c
    chi2 = float(resid @ resid)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - chi2 / ss_tot if ss_tot > 0 else None
    return Fit(samples.name, model, dict(zip(model.coefs, map(float, c))), int(len(y)), r2, chi2, int(rank))


def fit_all(groups: Mapping[str, Samples], model: Model, *, match: Optional[str] = None) -> dict[str, Fit]:
    """A fit per sample name (names filtered by the regex `match`)."""
    rx = re.compile(match) if match else None
    out = {}
    for name, s in groups.items():
        if rx is not None and not rx.search(name):
            continue
        f = fit(s, model)
        if f is not None:
            out[name] = f
    return out


# ----------------------------------------------------------------------------- rewriting


@dataclass
class RewriteReport:
    modelled: int = 0
    scaled: int = 0
    untouched: int = 0
    by_name: dict[str, int] = field(default_factory=dict)


def rewrite(
    traces: Iterable[Trace],
    fits: Optional[Mapping[str, Fit]] = None,
    *,
    scale: float = 1.0,
    what: str = "compute",
) -> RewriteReport:
    """Rewrite durations in place: modelled nodes get the fit, other nodes are scaled by `scale`.

    `what` = compute (COMP nodes, BigSim's sequential blocks) or all (every node with a
    duration). A predicted duration below 0 is clamped to 0.
    """
    if scale < 0:
        raise InputError(f"--scale must be >= 0, got {scale}")
    if what not in ("compute", "all"):
        raise InputError(f"--nodes must be compute or all, not {excerpt(what)}")
    from chakra.whatif.transforms import scaled_us

    rep = RewriteReport()
    fits = fits or {}
    for t in traces:
        for n in t.nodes:
            if what == "compute" and n.type != NodeType.COMP_NODE:
                rep.untouched += 1
                continue
            f = fits.get(n.name) or fits.get(node_key(n)) if fits else None
            if f is not None:
                v = f.predict(node_params(n))
                if v is not None:
                    n.duration_micros = max(0, int(round(v)))
                    rep.modelled += 1
                    rep.by_name[f.name] = rep.by_name.get(f.name, 0) + 1
                    continue
            if scale != 1.0:
                n.duration_micros = scaled_us(n.duration_micros, scale)
            rep.scaled += 1
    return rep
