"""The generative model: a hierarchy of small generators, as in the Chakra paper (§4, Fig. 2).

1. Sequence generator: a first-order Markov chain over communication *tokens*
   (collective type + group class, or one point-to-point transfer, each with the mixture
   component its message size falls in, so sizes follow the sequence) learned from each job's *master
   trace* (the lowest rank's communication sequence: every member of a group issues the same
   collectives in the same order, so one member's view loses nothing the replay needs), plus
   the empirical distribution of sequence lengths.
2. Message-size generator: per collective type, a Gaussian mixture over log2(bytes)
   (scikit-learn, component count by BIC); a token draws from its own component, clipped to the
   observed range and rounded to the observed alignment.
3. Compute generator: empirical gap lengths (compute nodes between two comm events, per next
   token), operator-class frequencies, and per class a Gaussian mixture over log(1 + duration).
4. Dependency generator: per token kind, the empirical distribution of how many compute nodes
   later the first dependent of a comm node sits (or none).

Group classes: a group spanning every rank is "world"; any other group of k ranks is a "kK"
class, instantiated on N output ranks as N/k consecutive groups of k (the world if k does not
divide N). So every rank issues every collective token on exactly one group of its class,
which is the replay constraint. A point-to-point token is one transfer between two ranks of the
W-rank input; on N output ranks it is repeated in every complete or partial tile of W
consecutive ranks that holds both ends (so N = W reproduces the input pattern exactly).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from chakra.dsl.synthesis.extract import JobView
from chakra.errors import ChakraError

MAX_COMPONENTS = 4
MIN_GMM_SAMPLES = 8
SNAP_DISTINCT = 32  # at most this many distinct observed values: samples snap to the nearest one


class SynthesisError(ChakraError):
    """The inputs cannot be modelled (no ranks, no events) or a dependency is missing."""


def _sklearn_mixture():
    try:
        from sklearn.mixture import GaussianMixture
    except ImportError:
        raise SynthesisError(
            "synthesis needs scikit-learn for its Gaussian mixtures: pip install 'chakra-et[synth]'"
        ) from None
    return GaussianMixture


class Distribution1D:
    """A 1-D distribution on a transformed axis: a Gaussian mixture, or the empirical values when
    there are too few samples or too few distinct values for a mixture to mean anything."""

    def __init__(self, values: np.ndarray, seed: int) -> None:
        values = np.asarray(values, dtype=float)
        if values.size == 0:
            raise SynthesisError("cannot fit a distribution to no values")
        self.lo, self.hi = float(values.min()), float(values.max())
        self.empirical = values
        self.gmm = None
        uniq = np.unique(values)
        distinct = uniq.size
        # Sizes (and often durations) are discrete: a mixture puts mass between the atoms, so when
        # there are few of them, a sample is snapped to the nearest observed value.
        self.atoms = uniq if distinct <= SNAP_DISTINCT else None
        if values.size >= MIN_GMM_SAMPLES and distinct >= 2:
            mixture = _sklearn_mixture()
            x = values.reshape(-1, 1)
            best, best_bic = None, np.inf
            for k in range(1, min(MAX_COMPONENTS, distinct) + 1):
                gm = mixture(n_components=k, random_state=seed, reg_covar=1e-4, init_params="k-means++").fit(x)
                bic = gm.bic(x)
                if bic < best_bic:
                    best, best_bic = gm, bic
            self.gmm = best

    @property
    def components(self) -> int:
        return 0 if self.gmm is None else int(self.gmm.n_components)

    def component_of(self, values: np.ndarray) -> np.ndarray:
        """Mixture component each value most likely came from (all 0 without a mixture)."""
        values = np.asarray(values, dtype=float)
        if self.gmm is None:  # few samples: every distinct observed value is its own component
            return self._nearest_atom(values)
        return self.gmm.predict(values.reshape(-1, 1)).astype(np.int64)

    def _nearest_atom(self, values: np.ndarray) -> np.ndarray:
        atoms = self.atoms
        if atoms is None or atoms.size == 1:
            return np.zeros(values.size, dtype=np.int64)
        right = np.clip(np.searchsorted(atoms, values), 1, atoms.size - 1)
        left = right - 1
        return np.where(np.abs(values - atoms[left]) <= np.abs(atoms[right] - values), left, right).astype(np.int64)

    def sample(self, n: int, rng: np.random.Generator, component: Optional[int] = None) -> np.ndarray:
        """`n` draws; with `component`, from that mixture component only."""
        if n <= 0:
            return np.zeros(0)
        if self.gmm is None:
            if component is not None and self.atoms is not None:
                return np.full(n, self.atoms[min(int(component), self.atoms.size - 1)])
            return rng.choice(self.empirical, size=n)
        weights = self.gmm.weights_
        if component is not None:
            comp = np.full(n, int(component))
        else:
            comp = rng.choice(len(weights), size=n, p=weights / weights.sum())
        means = self.gmm.means_[:, 0][comp]
        stds = np.sqrt(self.gmm.covariances_.reshape(len(weights), -1)[:, 0])[comp]
        draws = np.clip(rng.normal(means, stds), self.lo, self.hi)
        if self.atoms is not None:
            draws = self.atoms[self._nearest_atom(draws)]
        return draws


# ("coll", ctype, group class, size component) or ("p2p", input world size, "src>dst", size component).
# The size component (which Gaussian of the type's size mixture the message belongs to) makes the
# Markov chain carry the correlation between comm types and message sizes (e.g. DDP's alternating
# bucket sizes), as the paper's generator does.
Token = tuple[str, int, str, int]


def token_label(tok: Token) -> str:
    from chakra.schema import collective_name

    kind, ctype, cls, comp = tok
    if kind == "coll":
        return f"{collective_name(ctype)}@{cls}#{comp}"
    return f"P2P({cls} of {ctype})#{comp}"


def size_key(tok: Token) -> str:
    from chakra.schema import collective_name

    return collective_name(tok[1]) if tok[0] == "coll" else "SEND_RECV"


def _alignment(sizes: np.ndarray) -> int:
    """Largest power of two up to 16 dividing every observed size (dtype granularity)."""
    nz = sizes[sizes > 0].astype(np.int64)
    for a in (16, 8, 4, 2):
        if nz.size and np.all(nz % a == 0):
            return a
    return 1


@dataclass
class SynthModel:
    """Everything sampling needs; built by `fit`."""

    seed: int
    starts: Counter = field(default_factory=Counter)
    transitions: dict[Token, Counter] = field(default_factory=lambda: defaultdict(Counter))
    lengths: list[int] = field(default_factory=list)
    sizes: dict[str, Distribution1D] = field(default_factory=dict)
    size_align: dict[str, int] = field(default_factory=dict)
    size_values: dict[str, np.ndarray] = field(default_factory=dict)
    gaps: dict[Token, list[int]] = field(default_factory=lambda: defaultdict(list))
    all_gaps: list[int] = field(default_factory=list)
    tails: list[int] = field(default_factory=list)
    class_counts: Counter = field(default_factory=Counter)
    durations: dict[str, Distribution1D] = field(default_factory=dict)
    # Per class, the real (duration, num_ops, tensor_size) rows sorted by duration: a sampled
    # duration takes the work figures of the nearest real row, which keeps FLOPs, bytes and time
    # consistent for roofline simulators. Plus whether the class runs on the CPU (majority).
    work_rows: dict[str, np.ndarray] = field(default_factory=dict)
    cpu_class: dict[str, bool] = field(default_factory=dict)
    duration_values: dict[str, np.ndarray] = field(default_factory=dict)
    lags: dict[Token, list[Optional[int]]] = field(default_factory=lambda: defaultdict(list))
    # Recorded durations of the comm events of each token (what a replay of the trace uses).
    comm_durations: dict[Token, list[int]] = field(default_factory=lambda: defaultdict(list))
    token_counts: Counter = field(default_factory=Counter)
    input_worlds: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "input_ranks": self.input_worlds,
            "sequence_lengths": self.lengths,
            "tokens": {token_label(t): c for t, c in self.token_counts.most_common()},
            "size_mixture_components": {k: d.components for k, d in self.sizes.items()},
            "operator_classes": len(self.class_counts),
            "compute_nodes_per_gap_mean": float(np.mean(self.all_gaps)) if self.all_gaps else 0.0,
        }


def work_for(rows: np.ndarray, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(num_ops, tensor_size) of the real row nearest in duration to each sampled duration."""
    keys = rows[:, 0]
    idx = np.clip(np.searchsorted(keys, durations), 0, len(keys) - 1)
    left = np.clip(idx - 1, 0, len(keys) - 1)
    use_left = np.abs(durations - keys[left]) < np.abs(keys[idx] - durations)
    idx = np.where(use_left, left, idx)
    return rows[idx, 1], rows[idx, 2]


def obfuscated_name(index: int) -> str:
    """op_A, op_B, ..., op_Z, op_BA, ... (letters: class extraction folds digits, names must survive it)."""
    letters = ""
    while True:
        letters = chr(ord("A") + index % 26) + letters
        index //= 26
        if index == 0:
            return f"op_{letters}"


def _group_class(members: list[int], world: int) -> str:
    return "world" if len(members) >= world else f"k{len(members)}"


def fit(jobs: list[JobView], seed: int = 0) -> SynthModel:
    """Fit the model to one or more real jobs (each a list of rank timelines)."""
    if not jobs:
        raise SynthesisError("no input traces")
    m = SynthModel(seed=seed)
    sizes: dict[str, list[int]] = defaultdict(list)
    durations: dict[str, list[int]] = defaultdict(list)
    work: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    cpu_votes: Counter = Counter()
    masters: list[tuple[JobView, Any, list[tuple[str, int, str]]]] = []
    for job in jobs:
        m.input_worlds.append(job.world)
        classes = {pg: _group_class(members, job.world) for pg, members in job.groups.items()}
        # Master trace: the lowest rank that communicates at all.
        master = next((tl for tl in sorted(job.ranks, key=lambda t: t.rank) if tl.comms), None)
        for tl in job.ranks:
            m.class_counts.update(tl.classes)
            for c, d, (ops, nbytes, cpu) in zip(tl.classes, tl.durations, tl.work):
                durations[c].append(d)
                work[c].append((d, ops, nbytes))
                cpu_votes[c] += 1 if cpu else -1
        if master is None:
            continue
        base = []
        for ev in master.comms:
            if ev.kind == "coll":
                key = ("coll", ev.ctype, classes.get(ev.pg, "world"))
            else:
                key = ("p2p", job.world, ev.pg)  # one transfer between two input ranks
            base.append(key)
            sizes[size_key(key)].append(ev.size)
        masters.append((job, master, base))
    if not masters:
        raise SynthesisError("the input traces contain no communication nodes to model")
    for key, values in sizes.items():
        arr = np.asarray(values, dtype=float)
        m.size_values[key] = arr
        m.size_align[key] = _alignment(arr)
        m.sizes[key] = Distribution1D(np.log2(arr + 1), seed)
    for job, master, base in masters:
        toks: list[Token] = []
        for ev, key in zip(master.comms, base):
            comp = int(m.sizes[size_key(key)].component_of(np.log2([ev.size + 1.0]))[0])
            toks.append((*key, comp))
        for tl in job.ranks:
            for ev, tok in zip(tl.comms, toks):
                m.gaps[tok].append(ev.gap)
                m.all_gaps.append(ev.gap)
                m.lags[tok].append(ev.lag)
                m.comm_durations[tok].append(ev.duration)
            m.tails.append(tl.tail)
        m.lengths.append(len(toks))
        m.token_counts.update(toks)
        m.starts[toks[0]] += 1
        for a, b in zip(toks, toks[1:]):
            m.transitions[a][b] += 1
    for cls, values in durations.items():
        arr = np.asarray(values, dtype=float)
        m.duration_values[cls] = arr
        m.durations[cls] = Distribution1D(np.log1p(arr), seed)
        rows = np.asarray(work[cls], dtype=np.int64)
        m.work_rows[cls] = rows[np.argsort(rows[:, 0], kind="stable")]
        m.cpu_class[cls] = cpu_votes[cls] > 0
    return m
