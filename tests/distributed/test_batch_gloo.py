"""Batch conversion on Dask of gloo DeviceMesh jobs: the gloo collectives' process groups are placed
from every rank's trace (a survey pass on the workers, then the job-wide solution), so `--workers`
writes byte for byte what the plain converter writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra.converters.pytorch.driver import convert_files
from chakra.distributed.batch import convert_batch

pytest.importorskip("distributed", reason="Dask (distributed) is not installed: pip install 'chakra-et[dist]'")

ALONE = "from this rank's trace alone"


@pytest.mark.parametrize("name", ["tpdp4", "hsdp4"])
def test_batch_places_gloo_groups_as_the_plain_converter(client, samples_dir: Path, tmp_path, name):
    src = samples_dir / "pytorch" / name
    (tmp_path / "ref").mkdir()
    ref = convert_files(sorted(src.glob("et.*.json.gz")), sorted(src.glob("kineto.*.json.gz")), tmp_path / "ref" / name)
    # the job needs the job-wide answer: the plain path placed some rank's gloo threads from all ranks
    assert any(r.get("comm_pg_from_threads") for r in ref)
    result = convert_batch("pytorch", [src], tmp_path / "out" / name, client=client)
    assert not result.failed and result.cross_rank.ok
    assert [o.rank for o in result.ranks] == [0, 1, 2, 3]
    for o in result.ranks:
        assert not any(ALONE in w for w in o.stats["warnings"]), o.stats["warnings"]
    for r in range(4):
        assert (tmp_path / "out" / f"{name}.{r}.et").read_bytes() == (tmp_path / "ref" / f"{name}.{r}.et").read_bytes()
    assert (tmp_path / "out" / f"{name}.comm_groups.json").read_bytes() == (
        tmp_path / "ref" / f"{name}.comm_groups.json"
    ).read_bytes()
