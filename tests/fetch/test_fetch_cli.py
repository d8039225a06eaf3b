"""Arguments and settings of `culina-resolver fetch`: bad values stop it with a message that
names the variable, the value and what is accepted."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("variable, value, accepted", [
    ("CULINA_TIMEOUT", "abc", "whole number from 1 to 3600"),
    ("CULINA_TIMEOUT", "0", "whole number from 1 to 3600"),
    ("CULINA_TIMEOUT", "2.5", "whole number from 1 to 3600"),
    ("CULINA_RETRIES", "-1", "whole number from 0 to 20"),
    ("CULINA_RETRIES", "many", "whole number from 0 to 20"),
    ("CULINA_OFFLINE", "enabled", "1, true, yes or on"),
])
def test_malformed_setting_names_variable_value_and_form(fetcher, release, wheel, variable, value, accepted):
    outcome = fetcher.run(wheel.file, release.base_url, **{variable: value})
    assert outcome.returncode == 2
    assert f"{variable}='{value}'" in outcome.stderr and accepted in outcome.stderr
    assert release.requests == []


def test_release_url_comes_from_the_environment_when_not_passed(fetcher, release, wheel):
    outcome = fetcher.run(wheel.file, None, CULINA_RELEASE_URL=release.base_url + "/")
    assert outcome.returncode == 0, outcome.stderr
    assert len(release.object_gets(wheel.file)) == 1


def test_missing_release_url_is_a_usage_error(fetcher, wheel):
    outcome = fetcher.run(wheel.file, None)
    assert outcome.returncode == 2
    assert "--base-url" in outcome.stderr and "CULINA_RELEASE_URL" in outcome.stderr


def test_file_not_in_the_manifest_is_a_usage_error(fetcher, release):
    outcome = fetcher.run("culina-0.1.0-cp39-cp39-manylinux_2_28_x86_64-null.whl", release.base_url)
    assert outcome.returncode == 2
    assert "lists no wheel named" in outcome.stderr
    assert release.requests == []


def test_unknown_option_is_a_usage_error(fetcher, release, wheel):
    outcome = fetcher.run(wheel.file, release.base_url, "--fast")
    assert outcome.returncode == 2
    assert "unknown option '--fast'" in outcome.stderr
