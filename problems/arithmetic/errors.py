"""The one error every formula raises for bad input, naming the field so callers can point at it."""


class ArithmeticInputError(ValueError):
    """An input a formula cannot use: unknown id, out of range, NaN, or an unstable system.

    `field` is the name of the offending input as callers spell it (API query parameter,
    form field), so a view can show the message beside that field.
    """

    def __init__(self, *, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
