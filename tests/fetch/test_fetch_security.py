"""Transport rules of the fetch: trusted TLS only, no downgrade to plain http on redirects,
plain http only on loopback or with --allow-http, CA bundle variables honoured."""

from __future__ import annotations

from release_server import ReleaseServer


def test_untrusted_certificate_is_refused(fetcher, pki, wheel):
    with ReleaseServer({wheel.file: wheel.data}, cert=pki.rogue_cert, key=pki.rogue_key) as rogue:
        outcome = fetcher.run(wheel.file, rogue.base_url)
        assert outcome.returncode == 1, outcome.stderr
        assert "not trusted" in outcome.stderr and "CULINA_CA_BUNDLE" in outcome.stderr
        assert rogue.requests == [], "no request may be sent over an untrusted connection"
        assert outcome.leftovers() == []


def test_test_ca_is_not_trusted_without_a_ca_bundle(fetcher, release, wheel):
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_CA_BUNDLE=None)
    assert outcome.returncode == 1, outcome.stderr
    assert "not trusted" in outcome.stderr
    assert release.requests == []


def test_ssl_cert_file_is_honoured(fetcher, release, wheel, pki):
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_CA_BUNDLE=None, SSL_CERT_FILE=str(pki.ca))
    assert outcome.returncode == 0, outcome.stderr
    assert "(from SSL_CERT_FILE)" in outcome.stderr


def test_ca_bundle_naming_a_missing_file_is_a_clear_error(fetcher, release, wheel, tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_CA_BUNDLE=str(missing))
    assert outcome.returncode == 2
    assert f"CULINA_CA_BUNDLE='{missing}'" in outcome.stderr
    assert release.requests == []


def test_redirect_from_https_to_plain_http_is_refused(fetcher, pki, wheel):
    with ReleaseServer({wheel.file: wheel.data}) as plain:
        with ReleaseServer({wheel.file: wheel.data}, cert=pki.cert, key=pki.key,
                           redirect_base=plain.origin) as secure:
            # Even to loopback, and even with --allow-http: https never steps down.
            outcome = fetcher.run(wheel.file, secure.base_url, "--allow-http")
            assert outcome.returncode == 1, outcome.stderr
            assert "redirect" in outcome.stderr and "plain http" in outcome.stderr
            assert [r.status for r in secure.requests] == [302]
            assert plain.requests == []
            assert outcome.leftovers() == []


def test_plain_http_on_loopback_is_allowed(fetcher, wheel):
    with ReleaseServer({wheel.file: wheel.data}) as plain:
        outcome = fetcher.run(wheel.file, plain.base_url)
        assert outcome.returncode == 0, outcome.stderr


def test_plain_http_beyond_loopback_is_refused_before_connecting(fetcher, wheel):
    # 192.0.2.0/24 is TEST-NET-1: nothing answers there, and the refusal must come first.
    outcome = fetcher.run(wheel.file, "http://192.0.2.1/releases", CULINA_TIMEOUT="1", CULINA_RETRIES="0")
    assert outcome.returncode == 2, outcome.stderr
    assert "refusing plain http" in outcome.stderr and "--allow-http" in outcome.stderr
    assert outcome.seconds < 2
    assert outcome.leftovers() == []
