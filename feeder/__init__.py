"""Feeders: hand a simulator one rank's nodes as their dependencies are met (see `et_feeder`)."""

from chakra.feeder.et_feeder import ETFeeder, FeederError
from chakra.feeder.table import NodeTable, table_from_et, table_from_nodes

__all__ = ["ETFeeder", "FeederError", "NodeTable", "table_from_et", "table_from_nodes"]
