"""CULINA_KERNELS: which kernel families GPU calls may run, parsed once (culina._api.kernel_choice)."""
import pytest

from culina import _api
from culina.errors import CulinaError


@pytest.mark.parametrize("environ,expected", [
    ({}, "auto"), ({"CULINA_KERNELS": ""}, "auto"), ({"CULINA_KERNELS": " Portable "}, "portable"),
    ({"CULINA_KERNELS": "AUTO"}, "auto"),
])
def test_accepted_values(environ, expected):
    assert _api.kernel_choice(environ) == expected


def test_unknown_value_names_the_variable_value_and_choices():
    with pytest.raises(CulinaError) as err:
        _api.kernel_choice({"CULINA_KERNELS": "hopper"})
    assert err.value.message == "CULINA_KERNELS='hopper' is not understood"
    assert err.value.hint == "set it to auto or portable, or unset it (auto)"
