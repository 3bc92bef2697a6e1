"""JSON request bodies read strictly: the one place text from a JSON body enters the site.

Forms and query strings cannot carry invalid Unicode (Django decodes them with replacement
characters), but a JSON string can: `"\\ud800"` is valid JSON for a lone UTF-16 surrogate, a
Python str that no UTF-8 encoder, tokenizer or Redis client will take. Such a body is refused
here, at parse time, with the limits that keep parsing itself cheap: no integer longer than
`int_digits` (Python refuses past 4,300 digits with a ValueError, and converting thousands of
digits is quadratic), and no nesting deeper than `max_depth` (the parser recurses).

No Django: callers turn `JsonInputError` into their own error format.
"""

import json

MAX_DEPTH = 32
INT_DIGITS_MAX = 30


class JsonInputError(ValueError):
    """The body is not acceptable JSON; `message` says why, in words for the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _int_refuse_long(limit: int):  # noqa: ANN202
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > limit:
            raise JsonInputError(f"a number in the body has {len(text.lstrip('-')):,} digits; "
                                 f"no parameter takes more than {limit}")
        return int(text)
    return parse


def json_strict_loads(body: bytes | str, *, max_depth: int = MAX_DEPTH,
                      int_digits: int = INT_DIGITS_MAX, parse_int=None) -> object:  # noqa: ANN001
    """The parsed body, or JsonInputError: not UTF-8, not JSON, nested past `max_depth`, an
    integer past `int_digits` digits (unless `parse_int` handles integers its own way), or a
    string holding a lone surrogate."""
    try:
        value = json.loads(body, parse_int=parse_int or _int_refuse_long(int_digits))
    except JsonInputError:
        raise
    except UnicodeDecodeError:
        raise JsonInputError("the body is not valid UTF-8") from None
    except RecursionError:
        raise JsonInputError(f"the body is nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError
        raise JsonInputError(f"the body is not valid JSON ({exc})") from None
    json_value_check(value, max_depth=max_depth)
    return value


def json_value_check(value: object, *, max_depth: int = MAX_DEPTH) -> None:
    """JsonInputError when a parsed value nests deeper than `max_depth` or holds a string
    (key or value) that is not valid Unicode. Walks with a stack of its own, never recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _text_check(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > max_depth:
            raise JsonInputError(f"the body is nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                _text_check(key)
                stack.append((child, depth + 1))
        else:
            stack.extend((child, depth + 1) for child in item)


def _text_check(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonInputError(f"a string in the body holds invalid Unicode (a lone surrogate "
                             f"at character {exc.start})") from None
