"""LUMA: a declarative knowledge base and rule engine for hardware-software co-design of AI services."""

__version__ = "0.1.0"
