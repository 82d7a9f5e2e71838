"""The ETag of a dashboard answer (omniroute_admin/revalidate.py): the hash of its bytes,
the same whatever mask each render gave this browser's CSRF token, different for another
secret or another user."""

from __future__ import annotations

from django.middleware.csrf import get_token
from django.test import RequestFactory

from omniroute_admin.revalidate import etag_of, unmasked

SECRET = "A" * 16 + "b" * 16
OTHER_SECRET = "Z" * 32


def _masked(secret: str) -> str:
    """A masked token of `secret`, freshly masked as a render does."""
    request = RequestFactory().get("/")
    request.META["CSRF_COOKIE"] = secret
    return get_token(request)


def _form(token: str) -> bytes:
    return f'<form><input type="hidden" name="csrfmiddlewaretoken" value="{token}"></form>'.encode()


def test_a_masked_token_unmasks_to_its_secret() -> None:
    first, second = _masked(SECRET), _masked(SECRET)

    assert first != second
    assert (unmasked(first), unmasked(second)) == (SECRET, SECRET)


def test_two_renders_masking_the_token_differently_have_one_etag() -> None:
    first = etag_of(_form(_masked(SECRET)), user_id=7, csrf_secret=SECRET)
    second = etag_of(_form(_masked(SECRET)), user_id=7, csrf_secret=SECRET)

    assert first == second


def test_a_token_of_another_secret_counts_as_content() -> None:
    token = _masked(OTHER_SECRET)

    mine = etag_of(_form(_masked(SECRET)), user_id=7, csrf_secret=SECRET)
    foreign = etag_of(_form(token), user_id=7, csrf_secret=SECRET)

    assert mine != foreign


def test_the_same_bytes_for_another_user_or_secret_have_another_etag() -> None:
    body = b"<p>the same bytes</p>"

    etags = {
        etag_of(body, user_id=7, csrf_secret=SECRET),
        etag_of(body, user_id=8, csrf_secret=SECRET),
        etag_of(body, user_id=7, csrf_secret=OTHER_SECRET),
        etag_of(body, user_id=7, csrf_secret=""),
    }

    assert len(etags) == 4


def test_an_etag_is_strong_and_quoted() -> None:
    etag = etag_of(b"<p>x</p>", user_id=7, csrf_secret="")

    assert (etag[0], etag[-1], len(etag)) == ('"', '"', 42)
    assert not etag.startswith("W/")
