"""chakra.configfile reads plain configs without PyYAML, and only where PyYAML reads the same.

The plain subset (`key: [values]` lines, JSON) is a start-up saving for `chakra simulate`; it is
only correct if, on every text it accepts, it gives exactly `yaml.safe_load`'s document. Checked
here on every config in the repository, on ASTRA-sim's files (tests/data/samples holds copies of
its examples), and on a few thousand variants that reach the edges where YAML 1.1 reads a token
differently from what it looks like (booleans, octal, exponents, NaN, quotes, tabs, anchors...).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from chakra.configfile import _NotPlain, _plain_document, load_config
from chakra.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent.parent


def _plain(text: str):
    """The subset's reading, or None where it leaves the text to PyYAML."""
    try:
        return _plain_document(text)
    except (_NotPlain, ValueError, RecursionError):
        return None


def _yaml(text: str):
    try:
        return ("ok", yaml.safe_load(text))
    except Exception as exc:  # what PyYAML refuses the subset must leave to it
        return ("error", type(exc).__name__)


def _agrees(text: str) -> bool:
    got = _plain(text)
    if got is None:
        return True
    want = _yaml(text)
    # the same document, with the same types (1 and 1.0 and True compare equal in Python)
    return want[0] == "ok" and json.dumps(got, sort_keys=True) == json.dumps(want[1], sort_keys=True)


def _configs() -> list[Path]:
    roots = [REPO / "tests" / "data", REPO / "chakra" / "data", REPO / "examples"]
    found = (p for r in roots for ext in ("*.yml", "*.yaml", "*.json") for p in r.rglob(ext))
    return sorted(p for p in found if p.stat().st_size < 64 << 10)  # configs, not recorded traces


def test_every_config_in_the_repository_reads_as_pyyaml_reads_it():
    configs = _configs()
    assert len(configs) > 50
    plain = 0
    for path in configs:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert _agrees(text), path
        plain += _plain(text) is not None
    assert plain > 20  # the subset does cover the configs (else this saves nothing)


def test_astrasim_network_configs_are_plain(samples_dir):
    """ASTRA-sim's analytical network YAMLs (its examples and regression configs) and the ones
    chakra writes are the case the subset is for: none of them loads PyYAML."""
    paths = sorted(samples_dir.joinpath("astrasim").rglob("*.yml")) + sorted((REPO / "chakra/data").rglob("*.yml"))
    assert len(paths) >= 8
    for path in paths:
        text = path.read_text()
        assert _plain(text) is not None, path
        assert _plain(text) == yaml.safe_load(text), path


def test_network_configs_written_by_json_dumps_are_plain():
    """Scripts write network configs with json.dumps per key (double-quoted names): no PyYAML."""
    text = 'topology: ["Ring", "Switch", "Switch"]\nnpus_count: [8, 8, 16]\nbandwidth: [50.0, 50.0, 50.0]\n'
    assert _plain(text) == yaml.safe_load(text) == {
        "topology": ["Ring", "Switch", "Switch"], "npus_count": [8, 8, 16], "bandwidth": [50.0, 50.0, 50.0],
    }  # fmt: skip


# Values where YAML 1.1 (PyYAML) and a naive reading part ways, and plain ones.
_VALUES = [
    "1", "0", "-0", "-7", "10", "007", "08", "0x1F", "0o17", "0b101", "1_000", "+5", "1e3", "1E+3", "1.0e+3",
    "1.5", "-0.0", "50.0", "936.25", "1.", ".5", ".inf", "-.inf", ".nan", "NaN", "nan", "inf", "Infinity",
    "yes", "No", "ON", "off", "True", "false", "null", "Null", "~", "y", "n", "Y", "Ring", "Switch",
    "FullyConnected", "ring_2", "a-b", "a.b", "'Ring'", '"Ring"', '"a\\tb"', "'it''s'", "2020-01-01",
    "1:20", "190:20:30.15", "!!str 5", "&a 5", "*a", "[1, 2]", "{a: 1}", "", "#x", "a#b", "a #b", "= 1",
    '"a,b"', "'a''b'", '"a\'b"', '"a\\"b"', '"a"b"', "'a", '"a', '"', "'", '"Ring"x', '"a #b"', '"a: b"',
]  # fmt: skip
_KEYS = ["topology", "npus_count", "bandwidth", "local-mem-bw", "on", "yes", "null", "1", '"q"', "a b", "_x", "x_"]


def _pick(rng: random.Random, plain: list[str], odd: list[str]) -> str:
    """Mostly plain choices (so the variants reach the subset), sometimes an odd one."""
    return rng.choice(odd if rng.random() < 0.12 else plain)


_PLAIN_VALUES = ["1", "0", "-7", "10", "1.5", "-0.0", "50.0", "936.25", "Ring", "Switch", "ring_2", "-0", '"Ring"',
                 "'Switch'", '""', "''", '"1"', '"yes"', '"a b"', "'a: b'"]  # fmt: skip
_PLAIN_KEYS = ["topology", "npus_count", "bandwidth", "local-mem-bw", "_x", "x_"]


def _block_variant(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 4)):
        key = _pick(rng, _PLAIN_KEYS, _KEYS)
        if rng.random() < 0.6:
            items = [_pick(rng, _PLAIN_VALUES, _VALUES) for _ in range(rng.randint(0, 3))]
            sep = _pick(rng, [", ", ","], [" , ", ",  ", " ,"])
            value = "[" + _pick(rng, ["", " "], ["  "]) + sep.join(items) + _pick(rng, ["", " "], [", ", ","]) + "]"
        else:
            value = _pick(rng, _PLAIN_VALUES, _VALUES)
        line = _pick(rng, [""], [" ", "  "]) + key + _pick(rng, [": ", ":  "], [":", " : ", ":\t"]) + value
        line += _pick(rng, ["", "  # GB/s", "   "], ["#c", " #", "\t# x"])
        lines.append(line)
        if rng.random() < 0.2:
            lines.append(_pick(rng, ["", "# comment", "  "], ["---", "...", "  - 1", "\t", "%YAML 1.1", "  nested: 1"]))
    return _pick(rng, ["\n"], ["\r\n"]).join(lines) + rng.choice(["", "\n", "\n\n"])


def _json_variant(rng: random.Random) -> str:
    def value(depth: int) -> str:
        r = rng.random()
        if depth < 3 and r < 0.25:
            return "[" + rng.choice([",", ", "]).join(value(depth + 1) for _ in range(rng.randint(0, 3))) + "]"
        if depth < 3 and r < 0.4:
            items = [f'"{rng.choice(_KEYS).strip(chr(34))}"{rng.choice([":", ": ", " :"])}{value(depth + 1)}' for _ in
                     range(rng.randint(0, 3))]  # fmt: skip
            return "{" + rng.choice([",", ", ", ",\n"]).join(items) + "}"
        return rng.choice(
            ["1", "-0", "12", "1.5", "-0.0", "1e3", "1.0e+3", "1.5E3", "NaN", "Infinity", "true", "false", "null",
             '"Ring"', '"yes"', '"1"', '"a b"', '"a\\"b"', '"a\\u00e9"', '"#x"', '"a: b"', '""', "1" * 30]
        )  # fmt: skip

    return rng.choice(["", " ", "\n"]) + value(0) + rng.choice(["", "\n", " "])


@pytest.mark.parametrize("form", ["block", "json"])
def test_variants_read_as_pyyaml_reads_them_or_go_to_it(form):
    rng = random.Random(20240601 + (form == "json"))
    accepted = 0
    for _ in range(1500):
        text = _block_variant(rng) if form == "block" else _json_variant(rng)
        assert _agrees(text), repr(text)
        accepted += _plain(text) is not None
    assert accepted > 150  # the variants do reach the subset, not only PyYAML


@pytest.mark.parametrize(
    "text",
    [
        "topology: [ Ring ]\nnpus_count: [ 010 ]\n",  # octal to YAML 1.1
        "a: [ 1e3 ]\n",  # a string to PyYAML
        "on: [ 1 ]\n",  # a boolean key
        "a: [ yes ]\n",
        "a: 1\na: 2\n",  # a repeated key
        "a: [ 1, 2, ]\n",
        "a: 1#c\n",
        "a:\t1\n",
        '{"a": NaN}',
        '{"a": 1.5e3}',
        '{"a": "x\\"y"}',
        "[" * 40 + "]" * 40,
    ],
)
def test_texts_at_the_edges_are_left_to_pyyaml(text):
    assert _plain(text) is None


def test_errors_still_come_from_pyyaml(tmp_path):
    bad = tmp_path / "net.yml"
    bad.write_text("topology: [ Ring\nnpus_count: [ 8 ]\n")
    with pytest.raises(ConfigError, match=r"net.yml \(line \d+\): not valid YAML"):
        load_config(bad, "network config")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(deep, "network config")
