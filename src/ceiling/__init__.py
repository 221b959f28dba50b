"""ceiling: what limits performance on an HPC node, and by how much."""

__version__ = "0.1.0"
