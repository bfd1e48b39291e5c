"""The one webhook URL check, shared by submission and delivery: every URL it accepts
is one the HTTP client can send to, and numeric hosts mean what they say."""

from __future__ import annotations

import httpx
import pytest

from pagemill.webhooks.urls import MAX_URL_CHARS, InvalidWebhookUrl, validate_webhook_url


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/in?x=1",
        "http://127.0.0.1:8080/hook",
        "http://[2606:4700:4700::1111]/hook",
        "https://bücher.example/über",
        "https://hooks.example.com./in",
        "http://under_score.example.com/",
        "https://user:secret@hooks.example.com/in",
    ],
)
def test_usable_urls_pass_and_the_client_can_build_a_request(url: str) -> None:
    assert validate_webhook_url(f"  {url} ") == url
    httpx.Request("POST", url)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "empty"),
        ("ftp://example.com/", "absolute http or https"),
        ("/relative/path", "absolute http or https"),
        ("http:///nohost", "absolute http or https"),
        ("http://[::1/", "not a valid URL"),
        ("http://[zz::1]/", "not a valid URL"),
        ("http://example.com/x\r\nX-Injected: 1", "control characters"),
        ("http://example.com/a b", "spaces"),
        ("http://example.com/\x00", "control characters"),
        ("http://example.com:0/", "port"),
        ("http://example.com:99999/", "port"),
        ("http://exa%20mple.com/", "not a valid host name"),
        ("http://-bad-.example.com/", "not a valid host name"),
        ("http://a..b/", "not a valid host name"),
        ("http://[fe80::1%25eth0]/", "zone"),
        ("http://999.1.1.1/", "not a valid host name or IP address"),
        ("http://1.2.3.4.5/", "not a valid host name or IP address"),
        ("http://" + "a" * 64 + ".example.com/", "not a valid host name"),
        ("https://example.com/" + "a" * MAX_URL_CHARS, "at most 2048"),
    ],
)
def test_unusable_urls_are_refused_with_a_reason(url: str, says: str) -> None:
    with pytest.raises(InvalidWebhookUrl, match=says) as refused:
        validate_webhook_url(url)
    assert refused.value.message.startswith("The webhook_url")


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("http://0251.0376.0251.0376/", "169.254.169.254"),  # octal: the metadata address
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"),
        ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"),
        ("http://127.0.0.1./", "127.0.0.1"),
    ],
)
def test_legacy_ipv4_forms_are_refused_naming_the_address_they_denote(url: str, meant: str) -> None:
    with pytest.raises(InvalidWebhookUrl, match="legacy form") as refused:
        validate_webhook_url(url)
    assert meant in refused.value.message
