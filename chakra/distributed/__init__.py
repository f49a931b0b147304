"""Scale-out on Dask: batch conversion of many ranks and design-space sweeps of the simulator.

- `cluster`: a `distributed.Client` from `--workers N` (a local cluster of worker processes,
  started and stopped for the command) or `--scheduler tcp://HOST:8786` (an existing cluster);
- `inputs`: input files from explicit names, folders or globs, with rank numbers from the names;
- `batch`: one Dask task per rank (per report for nsys); workers read the inputs and write the
  outputs themselves (shared file system) and return small per-rank summaries, on which the
  cross-rank checks of `chakra.validate` run;
- `grid` + `sweep`: grid files (JSON-schema checked), their points, one simulation per point,
  results as Parquet + CSV, resumable.

Dask, pyarrow and plotly come with the `dist` extra (`pip install 'chakra-et[dist]'`).
"""
