"""Plain PUTs through obstore (storage/s3_puts.py): a definite answer comes from obstore;
anything else is sent again through botocore, which still decides how it ends, and a failure
after obstore's attempt may have landed is an unknown outcome, never "unreachable"."""

from __future__ import annotations

from typing import Any

import pytest

from storage import AccessDenied, S3ObjectStore, StoreSettings, UnknownOutcome, open_store
from storage.s3_puts import HandedBack, ObjectPuts
from storage.s3_reads import make_store
from tests.support.proxy import DROP_RESPONSE, FAIL_503, FORWARD, FaultProxy
from tests.support.servers import S3Endpoint, refused_port

MiB = 1024 * 1024


def _store(endpoint: S3Endpoint, **overrides: object) -> S3ObjectStore:
    store = open_store(f"s3://{endpoint.new_bucket()}/repo", endpoint.settings(**overrides))
    assert isinstance(store, S3ObjectStore)
    return store


def _count_botocore_puts(store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    real = store.client.put_object

    def counted(**kwargs: Any) -> Any:
        sent.append(kwargs["Key"])
        return real(**kwargs)

    monkeypatch.setattr(store.client, "put_object", counted)
    return sent


@pytest.mark.minio
def test_plain_puts_on_minio_go_through_obstore(
    minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(minio)
    store.capabilities()  # the conditional-write probe's own PUTs, before counting
    botocore = _count_botocore_puts(store, monkeypatch)
    store.stats.reset()
    body = bytes(range(256)) * 400
    info = store.put("dir/obj", body)
    with store.open_writer("dir/small") as w:  # under one part: one PUT, through obstore
        w.write(body)
    assert store.get("dir/obj") == body == store.get("dir/small")
    assert info.etag == store.head("dir/obj").etag and info.size == len(body)
    assert botocore == []
    assert store.stats.snapshot()["PUT"] == 2
    # Past `multipart_size` a plain PUT stays on botocore; conditional writes always do.
    big = b"b" * (store.settings.multipart_size + 1)
    store.put("dir/big", big)
    store.put_if_absent("dir/created", b"once")
    assert botocore == [store.prefix + "dir/big", store.prefix + "dir/created"]
    assert store.get("dir/big") == big


@pytest.mark.minio
def test_fast_puts_off_sends_every_put_through_botocore(
    minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(minio, fast_puts=False)
    botocore = _count_botocore_puts(store, monkeypatch)
    store.put("k", b"v")
    assert botocore == [store.prefix + "k"] and store.get("k") == b"v"


@pytest.mark.s3
@pytest.mark.parametrize("fault", [FAIL_503, DROP_RESPONSE], ids=["503", "answer-lost"])
def test_a_put_obstore_did_not_finish_is_sent_again_through_botocore(
    moto: S3Endpoint, fault: str
) -> None:
    proxy = FaultProxy(moto.endpoint)
    try:
        store = _store(moto, endpoint_url=proxy.endpoint, attempts_maximum=3)
        faults: list[str] = []

        def rule(method: str, path: str, headers: dict[str, str]) -> str:
            if method == "PUT" and path.split("?")[0].endswith("/repo/k") and not faults:
                faults.append(path)
                return fault
            return FORWARD

        proxy.rule = rule
        store.stats.reset()
        info = store.put("k", b"mine")
        assert store.get("k") == b"mine" and info.etag == store.head("k").etag
        assert [a for m, p, a in proxy.seen if m == "PUT"] == [fault, FORWARD]
        assert store.stats.snapshot()["PUT"] == 1  # one request of the caller's
    finally:
        proxy.stop()


@pytest.mark.s3
def test_a_put_whose_obstore_answer_was_lost_then_refused_is_an_unknown_outcome(
    moto: S3Endpoint,
) -> None:
    """obstore's attempt landed and its answer was lost; botocore's is refused (the endpoint
    went away): the object was written, so "unreachable" would be a lie."""
    proxy = FaultProxy(moto.endpoint)
    try:
        store = _store(moto, endpoint_url=proxy.endpoint, attempts_maximum=2)

        def rule(method: str, path: str, headers: dict[str, str]) -> str:
            if method == "PUT":
                proxy.rule = lambda m, p, h: FAIL_503
                return DROP_RESPONSE
            return FORWARD

        proxy.rule = rule
        with pytest.raises(UnknownOutcome) as err:
            store.put("k", b"mine")
        assert "may or may not have been applied" in str(err.value)
    finally:
        proxy.stop()
    direct = open_store(store.uri, moto.settings())
    assert direct.get("k") == b"mine"


@pytest.mark.minio
def test_wrong_credentials_are_obstores_definite_answer(minio: S3Endpoint) -> None:
    wrong = _store(minio, secret_access_key="wrong-secret")
    with pytest.raises(AccessDenied):
        wrong.put("k", b"v")


@pytest.mark.unit
def test_what_obstore_hands_back_says_whether_its_attempt_may_have_landed() -> None:
    keys: dict[str, Any] = {"access_key_id": "k", "secret_access_key": "s"}
    with refused_port() as port:
        closed = make_store(StoreSettings(endpoint_url=f"http://127.0.0.1:{port}", **keys), "b")
        assert closed is not None
        puts = ObjectPuts(closed, MiB)
        assert puts.put("k", b"v") == HandedBack(sent=False)  # refused: nothing was sent
        # A key object_store cannot take (the store's own key rules refuse it earlier).
        assert puts.put("a//b", b"v") == HandedBack(sent=False)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("endpoint", "signing", "unsigned"),
    [
        ("http://127.0.0.1:9", None, False),  # botocore signs bodies over plain http
        ("https://s3.example.com", None, True),  # and leaves them to TLS over https
        ("http://127.0.0.1:9", False, True),
        ("https://s3.example.com", True, False),
    ],
)
def test_obstore_signs_bodies_as_botocore_does(
    endpoint: str, signing: bool | None, unsigned: bool
) -> None:
    settings = StoreSettings(
        endpoint_url=endpoint, payload_signing=signing, access_key_id="k", secret_access_key="s"
    )
    store = make_store(settings, "b")
    assert store is not None
    assert store.config["unsigned_payload"] == str(unsigned).lower()
