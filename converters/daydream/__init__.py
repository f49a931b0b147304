"""Daydream's kernel-level dependency graph (ATC'20 §4.2) from an nsys-shaped SQLite report.

Shared by two plugins: `nsys` (Nsight Systems exports) and `cupti` (CUPTI activity records,
loaded into a temporary SQLite of the same shape). `schema` opens a report and checks its
tables, `source` streams its events in time order, `ranks` plans which rows make which rank,
`build` makes the graph in one pass, `nccl` reads NCCL kernels, `driver` writes the rank files.
"""
