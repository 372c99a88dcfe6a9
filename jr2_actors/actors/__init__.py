"""Thin pykka actor shells over the pure cores; they talk only by frozen-dataclass messages."""
