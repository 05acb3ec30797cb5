"""A stand-in for the `expecttest` package, which torch's test helpers
(torch/testing/_internal/common_utils.py) import and Debian 12 does not package. suite.py puts
this folder on sys.path only where the real package is missing.

It offers what those helpers use: ACCEPT (the flag that rewrites expectations in place, which
this stand-in never does) and TestCase with assertExpectedInline, comparing the dedented
expectation with the actual text.
"""
import textwrap
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        """Fails unless `actual` equals the dedented `expect` (the real package's comparison,
        without its rewriting of the test's source)."""
        if ACCEPT:
            raise RuntimeError("expecttest stand-in: ACCEPT (rewriting expectations) is not supported")
        self.assertMultiLineEqual(textwrap.dedent(expect), actual)
