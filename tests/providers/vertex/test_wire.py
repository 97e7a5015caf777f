"""Vertex's URLs, body and errors, against the SDK's rules and Google's error shapes."""

from __future__ import annotations

import json

import pytest

from claudex.providers.vertex import (
    VertexFailure,
    anthropic_body,
    count_tokens_body,
    count_tokens_url,
    default_base_url,
    error_response,
    parse_error,
    parse_predict_path,
    predict_url,
    vertex_body,
)


@pytest.mark.parametrize(("region", "base"), [
    ("us-east5", "https://us-east5-aiplatform.googleapis.com/v1"),
    ("global", "https://aiplatform.googleapis.com/v1"),
    ("us", "https://aiplatform.us.rep.googleapis.com/v1"),
    ("eu", "https://aiplatform.eu.rep.googleapis.com/v1"),
])
def test_bases_as_the_sdk_picks_them(region: str, base: str) -> None:
    assert default_base_url(region) == base


def test_predict_and_count_urls_and_their_reading() -> None:
    base = default_base_url("global")
    url = predict_url(base, "my-proj", "global", "claude-sonnet-4-5@20250929", stream=True)
    assert url == ("https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global/"
                   "publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict")
    route = parse_predict_path(url.removeprefix("https://aiplatform.googleapis.com"))
    assert route is not None and route.stream and not route.count_tokens
    assert (route.project, route.region, route.model, route.prefix) == (
        "my-proj", "global", "claude-sonnet-4-5@20250929", "/v1")
    count = count_tokens_url(base, "my-proj", "us-east5")
    assert count.endswith("/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict")
    counted = parse_predict_path(count.removeprefix("https://aiplatform.googleapis.com"))
    assert counted is not None and counted.count_tokens
    assert parse_predict_path("/v1/messages") is None


def test_bodies_as_the_sdk_rewrites_them() -> None:
    client = {"model": "m", "stream": True, "max_tokens": 3}
    assert vertex_body(client) == {"stream": True, "max_tokens": 3,
                                   "anthropic_version": "vertex-2023-10-16"}
    assert count_tokens_body({"model": "m"}) == {"model": "m",
                                                 "anthropic_version": "vertex-2023-10-16"}
    assert anthropic_body(vertex_body(client), model="m") == client


def _google(status: str, message: str, *, in_array: bool = False) -> tuple[int, bytes]:
    code, headers, body = error_response(status, message, in_array=in_array)
    assert headers["Content-Type"] == "application/json; charset=UTF-8"
    return code, body


@pytest.mark.parametrize(("status", "failure"), [
    ("RESOURCE_EXHAUSTED", VertexFailure.RATE_LIMITED),
    ("UNAVAILABLE", VertexFailure.SERVER),
    ("INTERNAL", VertexFailure.SERVER),
    ("DEADLINE_EXCEEDED", VertexFailure.SERVER),
    ("UNAUTHENTICATED", VertexFailure.TOKEN_REJECTED),
    ("PERMISSION_DENIED", VertexFailure.AUTH),
    ("FAILED_PRECONDITION", VertexFailure.MODEL_UNAVAILABLE),
    ("NOT_FOUND", VertexFailure.MODEL_UNAVAILABLE),
    ("INVALID_ARGUMENT", VertexFailure.CLIENT),
])
@pytest.mark.parametrize("in_array", [False, True])
def test_every_google_status_object_or_array(status: str, failure: VertexFailure,
                                             in_array: bool) -> None:
    code, body = _google(status, "words", in_array=in_array)
    error = parse_error(code, body)
    assert (error.failure, error.status, error.message, error.anthropic) == (
        failure, status, "words", False)


def test_a_real_quota_refusal_in_an_array() -> None:
    body = (b'[{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/'
            b'online_prediction_requests_per_base_model with base model: anthropic-claude-3-5-'
            b'sonnet-v2. Please submit a quota increase request.","status":"RESOURCE_EXHAUSTED"}}]')
    error = parse_error(429, body)
    assert error.failure is VertexFailure.RATE_LIMITED and error.message.startswith("Quota")


def test_the_reason_and_anthropic_shaped_errors() -> None:
    body = json.dumps({"error": {"code": 401, "message": "m", "status": "UNAUTHENTICATED",
                                 "details": [{"reason": "ACCESS_TOKEN_EXPIRED"}]}}).encode()
    assert parse_error(401, body).reason == "ACCESS_TOKEN_EXPIRED"
    overloaded = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    error = parse_error(529, overloaded)
    assert error.anthropic and error.failure is VertexFailure.SERVER
    assert parse_error(400, b'{"type":"error","error":{"type":"invalid_request_error"}}') \
        .failure is VertexFailure.CLIENT
    assert parse_error(502, b"<html>bad gateway</html>").failure is VertexFailure.SERVER
