"""Checking AWS Signature Version 4 as an AWS service does, for the Bedrock fake.

The signature is recomputed with botocore's own `SigV4Auth` from the request as received (its
raw path, the headers its `SignedHeaders` names, its body) and the secret of the access key it
names; then compared. The refusals are AWS's, with their types and words:

    no Authorization header         403 AccessDeniedException {"Message": "Authorization header
                                    is missing"} (Bedrock's answer: claude-code#45000,
                                    karthink/gptel#1397)
    an access key AWS does not know 403 UnrecognizedClientException "The security token
    (or the wrong session token)    included in the request is invalid." (claude-code#2260)
    a signature that does not match 403 InvalidSignatureException "The request signature we
    (wrong secret, tampered body)   calculated does not match the signature you provided. ..."
    a date over 5 minutes off       403 InvalidSignatureException "Signature expired: <date> is
                                    now earlier than <now - 5 min> (<now> - 5 min.)" (AWS's
                                    words; its "not yet current" twin for the future)
    a malformed Authorization       400 IncompleteSignature (Bedrock's troubleshooting page)

Not confirmed for Bedrock itself: the wording for a credential scoped to another region or
service (AWS's general "Credential should be scoped to ..." sentences are used).
"""

from __future__ import annotations

import calendar
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["AuthRefusal", "AwsTestKey", "check_signature"]

SKEW_S: Final = 300
_AMZ_DATE: Final = "%Y%m%dT%H%M%SZ"
_AUTH: Final = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+),\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+),\s*Signature=(?P<signature>[0-9a-f]{64})$")
_MISMATCH: Final = ("The request signature we calculated does not match the signature you "
                    "provided. Check your AWS Secret Access Key and signing method. Consult the "
                    "service documentation for details.")
_BAD_TOKEN: Final = "The security token included in the request is invalid."


@dataclass(frozen=True, slots=True)
class AwsTestKey:
    """Keys the fake knows (a test makes them up)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class AuthRefusal:
    error_type: str
    message: str
    key: str = "message"
    """The body's key: AWS's auth layer writes "Message" for some."""


def _stamp(seconds: float) -> str:
    return time.strftime(_AMZ_DATE, time.gmtime(seconds))


def _incomplete(what: str) -> AuthRefusal:
    return AuthRefusal("IncompleteSignature", what)


def check_signature(*, method: str, raw_path: str, query: str, headers: Mapping[str, str],
                    body: bytes, keys: Mapping[str, AwsTestKey], region: str, service: str,
                    now: float) -> AuthRefusal | None:
    """None when the request is signed by a known key for `service` in `region` within five
    minutes of `now`; the refusal AWS would answer otherwise. `headers` have lowercased
    names; `raw_path` is as received (still percent-encoded)."""
    authorization = headers.get("authorization")
    if not authorization:
        return AuthRefusal("AccessDeniedException", "Authorization header is missing", "Message")
    match = _AUTH.match(authorization.strip())
    if match is None:
        return _incomplete("Authorization header requires 'Credential', 'SignedHeaders' and "
                           "'Signature' parameters.")
    access_key, _, scope = match["credential"].partition("/")
    key = keys.get(access_key)
    if key is None:
        return AuthRefusal("UnrecognizedClientException", _BAD_TOKEN)
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = calendar.timegm(time.strptime(amz_date, _AMZ_DATE))
    except ValueError:
        return _incomplete("Authorization header requires existence of either a 'X-Amz-Date' "
                           "or a 'Date' header.")
    if signed_at < now - SKEW_S:
        return AuthRefusal("InvalidSignatureException",
                           f"Signature expired: {amz_date} is now earlier than "
                           f"{_stamp(now - SKEW_S)} ({_stamp(now)} - 5 min.)")
    if signed_at > now + SKEW_S:
        return AuthRefusal("InvalidSignatureException",
                           f"Signature not yet current: {amz_date} is still later than "
                           f"{_stamp(now + SKEW_S)} ({_stamp(now)} + 5 min.)")
    parts = scope.split("/")
    if len(parts) != 4 or parts[3] != "aws4_request" or parts[0] != amz_date[:8]:
        return _incomplete("Credential should be of the form "
                           "'<key>/<date>/<region>/<service>/aws4_request'.")
    if parts[1] != region:
        return AuthRefusal("InvalidSignatureException",
                           f"Credential should be scoped to a valid region, not '{parts[1]}'.")
    if parts[2] != service:
        return AuthRefusal("InvalidSignatureException",
                           f"Credential should be scoped to correct service: '{service}'.")
    if headers.get("x-amz-security-token") != key.session_token:
        return AuthRefusal("UnrecognizedClientException", _BAD_TOKEN)
    expected = _signature(key, method=method, raw_path=raw_path, query=query, headers=headers,
                          signed=match["signed"].split(";"), body=body, region=region,
                          service=service, amz_date=amz_date)
    if not hmac.compare_digest(expected, match["signature"]):
        return AuthRefusal("InvalidSignatureException", _MISMATCH)
    return None


def _signature(key: AwsTestKey, *, method: str, raw_path: str, query: str,
               headers: Mapping[str, str], signed: list[str], body: bytes, region: str,
               service: str, amz_date: str) -> str:
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]

    host = headers.get("host", "localhost")
    url = f"http://{host}{raw_path}" + (f"?{query}" if query else "")
    chosen = {name: headers[name] for name in signed if name in headers}
    request: Any = AWSRequest(method=method, url=url, headers=chosen, data=body)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(ReadOnlyCredentials(key.access_key_id, key.secret_access_key,
                                           key.session_token), service, region)
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))
