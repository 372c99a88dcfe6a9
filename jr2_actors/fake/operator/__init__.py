"""The fake jr2 operator: its pure decisions and the actor that applies them."""
