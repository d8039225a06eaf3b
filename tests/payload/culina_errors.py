"""The shape every error culina raises must have (culina.errors): shared by the tests that
provoke them."""
from culina.errors import CulinaError


def assert_culina_error(error: BaseException) -> None:
    """`error` is a CulinaError whose message names the thing and whose hint gives the fix,
    apart, with str() showing both in the one fixed form."""
    assert isinstance(error, CulinaError), f"{type(error).__name__} is no CulinaError: {error}"
    assert error.message and error.hint, f"{type(error).__name__} without a message or a hint: {error!r}"
    assert str(error) == f"{error.message}; {error.hint}"
