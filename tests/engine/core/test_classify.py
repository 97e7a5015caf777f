"""The failure table (DESIGN.md): every upstream outcome maps to the documented disposition."""

from __future__ import annotations

import aiohttp
import httpx
import pytest

from claudex.engine.core.classify import Outcome, classify_status, map_transport_error
from claudex.engine.core.policy import POLICY, BreakerEffect, Retry


@pytest.mark.parametrize(
    ("status", "oauth", "outcome", "retry_same", "failover", "breaker_failure"),
    [
        (200, False, Outcome.OK, False, False, False),
        (500, False, Outcome.SERVER_ERROR, False, True, True),
        (502, False, Outcome.SERVER_ERROR, False, True, True),
        (503, False, Outcome.SERVER_ERROR, False, True, True),
        (504, False, Outcome.SERVER_ERROR, False, True, True),
        (529, False, Outcome.SERVER_ERROR, False, True, True),
        (429, False, Outcome.RATE_LIMITED, True, True, False),
        (401, False, Outcome.AUTH_ERROR, False, True, True),
        (403, False, Outcome.AUTH_ERROR, False, True, True),
        (403, True, Outcome.AUTH_ERROR, False, True, True),
        (401, True, Outcome.TOKEN_EXPIRED, True, True, True),
        (400, False, Outcome.CLIENT_ERROR, False, False, False),
        (404, False, Outcome.CLIENT_ERROR, False, False, False),
        (409, False, Outcome.CLIENT_ERROR, False, False, False),
        (413, False, Outcome.CLIENT_ERROR, False, False, False),
        (422, False, Outcome.CLIENT_ERROR, False, False, False),
    ],
)
def test_status_table(status: int, oauth: bool, outcome: Outcome, retry_same: bool,
                      failover: bool, breaker_failure: bool) -> None:
    got = classify_status(status, oauth=oauth)
    assert got is outcome
    rule = POLICY[got]
    assert (rule.retry is not Retry.NO, rule.failover,
            rule.breaker is BreakerEffect.FAILURE) == (retry_same, failover, breaker_failure)


def test_every_outcome_has_a_row_in_the_policy() -> None:
    assert set(Outcome) <= set(POLICY)


def _conn_key() -> object:
    # ClientConnectorError wants a connection key; any object with host/port/ssl works.
    class Key:
        host = "127.0.0.1"
        port = 9
        ssl = False
    return Key()


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (aiohttp.ClientConnectorError(_conn_key(), ConnectionRefusedError(111, "refused")),  # type: ignore[arg-type]
         Outcome.CONNECT_ERROR),
        (aiohttp.ConnectionTimeoutError(), Outcome.CONNECT_ERROR),
        (aiohttp.SocketTimeoutError(), Outcome.TIMEOUT),
        (TimeoutError(), Outcome.TIMEOUT),
        (aiohttp.ServerDisconnectedError(), Outcome.DISCONNECTED),
        (aiohttp.ClientPayloadError("cut"), Outcome.STREAM_ERROR),
        (httpx.ConnectError("refused"), Outcome.CONNECT_ERROR),
        (httpx.ConnectTimeout("slow"), Outcome.CONNECT_ERROR),
        (httpx.ReadTimeout("slow"), Outcome.TIMEOUT),
        (httpx.RemoteProtocolError("closed"), Outcome.DISCONNECTED),
    ],
)
def test_transport_errors_map_to_one_outcome(exc: BaseException, outcome: Outcome) -> None:
    got, words = map_transport_error(exc)
    assert got is outcome
    assert words and "Traceback" not in words


def test_refused_connection_is_described_plainly() -> None:
    exc = aiohttp.ClientConnectorError(_conn_key(), ConnectionRefusedError(111, "refused"))  # type: ignore[arg-type]
    assert map_transport_error(exc) == (Outcome.CONNECT_ERROR, "connection refused")
