"""Batch conversion on Dask of gloo DeviceMesh/subgroup jobs: the gloo collectives' process groups
are placed from every rank's trace (a survey pass on the workers, then the job-wide solution), so
`--workers` writes byte for byte what the plain converter writes. subgroups4 and mesh3d8 come out
different on every rank when each rank is converted alone (the batch path before); tpdp4 and hsdp4
come out the same either way but were warned about as placed from one rank's trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra.converters.pytorch.driver import convert_files
from chakra.distributed.batch import convert_batch

pytest.importorskip("distributed", reason="Dask (distributed) is not installed: pip install 'chakra-et[dist]'")

ALONE = "from this rank's trace alone"


@pytest.mark.parametrize("name", ["tpdp4", "hsdp4", "subgroups4", "mesh3d8"])
def test_batch_places_gloo_groups_as_the_plain_converter(client, samples_dir: Path, tmp_path, name):
    src = samples_dir / "pytorch" / name
    world = json.loads((src / "manifest.json").read_text())["world_size"]
    (tmp_path / "ref").mkdir()
    ets = [src / f"et.{r}.json.gz" for r in range(world)]
    ref = convert_files(ets, [src / f"kineto.{r}.json.gz" for r in range(world)], tmp_path / "ref" / name)
    # the job needs the job-wide answer: the plain path placed gloo threads from all ranks
    assert any(r.get("comm_pg_from_threads") for r in ref)
    result = convert_batch("pytorch", [src], tmp_path / "out" / name, client=client)
    assert not result.failed and result.cross_rank.ok
    assert [o.rank for o in result.ranks] == list(range(world))
    for o in result.ranks:
        assert not any(ALONE in w for w in o.stats["warnings"]), o.stats["warnings"]
    for r in range(world):
        assert (tmp_path / "out" / f"{name}.{r}.et").read_bytes() == (tmp_path / "ref" / f"{name}.{r}.et").read_bytes()
    assert (tmp_path / "out" / f"{name}.comm_groups.json").read_bytes() == (
        tmp_path / "ref" / f"{name}.comm_groups.json"
    ).read_bytes()
