"""srl_lab: SRL's actor / policy / trainer dataflow on Dask, built for notebooks."""

__version__ = "0.1.0"
