"""Object-store writes under faults, against a real MinIO behind a fault-injecting TCP proxy: a
write that was sent and may have been applied never ends as "cannot reach"; where reading
back can tell, it tells (docs/faults.md)."""

from __future__ import annotations

import threading

import pytest

from storage import (
    Conflict,
    EndpointUnreachable,
    ObjectStore,
    S3ObjectStore,
    UnknownOutcome,
    open_store,
)
from tests.support.fault_proxy import DROP, RESET, Fault, FaultProxy
from tests.support.faults import once, through
from tests.support.servers import S3Endpoint

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]


def _stores(
    minio: S3Endpoint, proxy: FaultProxy, **settings: object
) -> tuple[ObjectStore, ObjectStore]:
    """(through the proxy, straight to MinIO) on a fresh bucket."""
    bucket = minio.new_bucket()
    faulty = open_store(f"s3://{bucket}/r", through(minio, proxy).settings(**settings))
    direct = open_store(f"s3://{bucket}/r", minio.settings())
    assert isinstance(faulty, S3ObjectStore)
    faulty.capabilities()  # the probe goes through the proxy before any fault is armed
    return faulty, direct


def _put_to(key: str) -> object:
    return lambda method, path: method == "PUT" and path.split("?")[0].endswith("/r/" + key)


def test_create_only_put_landed_then_endpoint_refused_is_read_back_as_ours(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    """The answer is lost after the PUT reached MinIO, then the endpoint refuses for 3 s: the
    retry is refused, and that used to end as EndpointUnreachable although it landed."""
    faulty, direct = _stores(minio, proxy)
    proxy.rule = once(_put_to("log/1"), Fault.drop(refuse=3))  # type: ignore[arg-type]
    info = faulty.put_if_absent("log/1", b"writer-a instant-1")
    assert info.size == len(b"writer-a instant-1")
    assert direct.get("log/1") == b"writer-a instant-1"
    assert next(a for m, p, a in proxy.seen if m == "PUT" and "/r/log/1" in p) == DROP


def test_create_only_put_reset_before_it_reached_the_server_is_sent_again(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    faulty, direct = _stores(minio, proxy)
    proxy.rule = once(_put_to("k"), Fault.reset(), times=2)  # type: ignore[arg-type]
    faulty.put_if_absent("k", b"mine")
    assert direct.get("k") == b"mine"
    puts = [a for m, p, a in proxy.seen if m == "PUT" and p.split("?")[0].endswith("/r/k")]
    assert puts[:2] == [RESET, RESET] and len(puts) >= 3


def test_create_only_put_of_someone_elses_object_is_a_conflict_after_a_lost_answer(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    faulty, direct = _stores(minio, proxy)
    direct.put_if_absent("k", b"theirs")
    proxy.rule = once(_put_to("k"), Fault.drop(refuse=1))  # type: ignore[arg-type]
    with pytest.raises(Conflict):
        faulty.put_if_absent("k", b"mine")
    assert direct.get("k") == b"theirs"


def test_plain_put_whose_answer_was_lost_before_a_refusal_is_an_unknown_outcome(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    faulty, direct = _stores(minio, proxy)
    proxy.rule = once(_put_to("k"), Fault.drop(refuse=2))  # type: ignore[arg-type]
    with pytest.raises(UnknownOutcome) as err:
        faulty.put("k", b"v")
    assert not isinstance(err.value, EndpointUnreachable)
    assert "may or may not have been applied" in str(err.value)
    assert direct.get("k") == b"v"  # it did land: "unreachable" would have been a lie


def test_unknown_outcome_when_the_endpoint_stays_away_past_the_read_back(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    faulty, direct = _stores(minio, proxy, read_back_timeout=1)
    proxy.rule = once(_put_to("k"), Fault.drop(refuse=4))  # type: ignore[arg-type]
    with pytest.raises(UnknownOutcome) as err:
        faulty.put_if_absent("k", b"mine")
    assert "reading back for 1 s could not confirm" in str(err.value)
    assert direct.get("k") == b"mine"  # landed: the caller was told "unknown", not "failed"


def test_a_refused_endpoint_that_was_never_reached_is_still_unreachable(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    """Nothing sent, nothing applied: the plain failure stays plain."""
    faulty, direct = _stores(minio, proxy)
    # A fresh client: a pooled connection the refusal cut could have carried the request
    # out (the client cannot tell), which is an unknown outcome, rightly.
    fresh = open_store(faulty.uri, through(minio, proxy).settings())
    back = threading.Event()
    proxy.refuse_until(back)  # for as long as the call takes, however slow the machine
    with pytest.raises(EndpointUnreachable) as err:
        fresh.put_if_absent("k", b"mine")
    back.set()
    assert not isinstance(err.value, UnknownOutcome)
    assert not direct.exists("k")


def test_delayed_answers_change_nothing(minio: S3Endpoint, proxy: FaultProxy) -> None:
    faulty, direct = _stores(minio, proxy)
    proxy.rule = lambda m, p: Fault.forward(delay=0.2)
    faulty.put_if_absent("k", b"mine")
    assert faulty.get("k") == b"mine" == direct.get("k")


def test_a_412_to_our_own_retry_that_cannot_be_read_back_is_unknown_not_a_conflict(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    """The first attempt lands and its answer is lost; the retry answers 412 (our own object)
    and the endpoint then refuses past the read-back: a conflict would tell the caller that
    someone else won, and a commit would be abandoned although it completed."""
    faulty, direct = _stores(minio, proxy, read_back_timeout=1)
    puts = [0]

    def rule(method: str, path: str) -> Fault:
        if method == "PUT" and path.split("?")[0].endswith("/r/k"):
            puts[0] += 1
            return Fault.drop() if puts[0] == 1 else Fault(refuse=4)
        return Fault.forward()

    proxy.rule = rule
    with pytest.raises(UnknownOutcome):
        faulty.put_if_absent("k", b"mine")
    assert puts[0] == 2 and direct.get("k") == b"mine"
