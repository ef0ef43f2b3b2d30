"""releval: declarative, data-versioned retrieval evaluation."""

__version__ = "0.1.0"
