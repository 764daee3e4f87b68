"""Bad input at the decoding and scoring command lines (``translate``, ``parse``, ``parse-eval``).

Every bad input gets one answer: exit status 2 and one line on stderr, ``PROG: error: MESSAGE``,
the message naming the input (``stdin:3``, a file, a model) and what is wrong with it. A user
reads a line; a traceback is for whoever debugs, so it is shown only with ``--debug``. An error
that is not the input's (a defect) still ends in one line, with exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable, Iterator


class InputError(Exception):
    """Input a command refuses; the message names the input and the problem."""


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true",
                        help="on an error, log its traceback to stderr before the one-line message")


def first_line(error: BaseException, limit: int = 300) -> str:
    """``error``'s message as one line (libraries' messages run over several)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def utf8_lines(lines: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of a byte stream without their terminators, each decoded as UTF-8.

    A line that is not UTF-8 is an :class:`InputError` ``NAME:LINE: invalid UTF-8 at byte OFFSET``
    (line numbers from 1, the offset of the first bad byte in its line from 0): decoding the
    stream whole would name only an offset in the whole input.
    """
    for number, raw in enumerate(lines, start=1):
        raw = raw.rstrip(b"\r\n")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{name}:{number}: invalid UTF-8 at byte {error.start}") from error


def check_utf8_argument(text: str, name: str) -> str:
    """``text`` if it is valid UTF-8: Python keeps an argument's invalid bytes as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        offset = len(text[: error.start].encode("utf-8", "surrogateescape"))
        raise InputError(f"{name}: invalid UTF-8 at byte {offset}") from error
    return text


def run_command(prog: str, command: Callable[[], int], debug: bool = False) -> int:
    """``command()``'s exit status; an :class:`InputError` is one line and status 2, any other
    error one line and status 1 (its traceback logged first with ``debug``)."""
    try:
        return command()
    except InputError as error:
        message, status = str(error), 2
        if debug:
            logging.getLogger(prog).error("traceback of the error below", exc_info=True)
    except Exception as error:  # a defect, not the input: the line says how to see where it is
        message, status = f"unexpected {type(error).__name__}: {first_line(error)}", 1
        if debug:
            logging.getLogger(prog).error("traceback of the error below", exc_info=True)
        else:
            message += " (--debug shows the traceback)"
    sys.stderr.write(f"{prog}: error: {message}\n")
    return status
