"""Seeds that are the same in every process: Python's hash() of a str changes from one
interpreter to the next (PYTHONHASHSEED), so a failure seeded from it drew inputs nobody could
draw again."""
import zlib


def stable_seed(*parts) -> int:
    """A 31-bit seed from `parts` (strs, ints, tuples of them), the same in every run."""
    return zlib.crc32(repr(parts).encode()) % 2**31
