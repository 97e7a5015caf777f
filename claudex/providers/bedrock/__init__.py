"""Claude on AWS Bedrock (DESIGN.md "Claude on clouds"): the four small pieces that make a
Bedrock request of an Anthropic one — the URL (`urls`), the body (`body`), the stream
(`eventstream`, `stream`) and the errors (`errors`). The signer is the engine's
(`claudex.engine.credentials.aws_sigv4`): nothing here does I/O or imports the engine."""

from claudex.providers.bedrock.body import (
    ANTHROPIC_VERSION,
    anthropic_body,
    bedrock_body,
    betas_from_header,
    without_betas,
    without_fields,
)
from claudex.providers.bedrock.errors import (
    STATUS_BY_TYPE,
    BedrockError,
    BedrockFailure,
    FieldPath,
    describe,
    error_response,
    error_type_of,
    parse_error,
    parse_exception,
)
from claudex.providers.bedrock.eventstream import (
    EventStreamError,
    Frame,
    FrameDecoder,
    HeaderValue,
    encode_frame,
)
from claudex.providers.bedrock.stream import (
    EVENTSTREAM_CONTENT_TYPE,
    EventStreamToSse,
    SseToEventStream,
    anthropic_error_type,
    chunk_frame,
    exception_frame,
    sse_event,
)
from claudex.providers.bedrock.urls import (
    MANTLE_SIGNING_SERVICE,
    SIGNING_SERVICE,
    InvokeRoute,
    default_base_url,
    invoke_url,
    mantle_base_url,
    model_path_segment,
    parse_invoke_path,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "EVENTSTREAM_CONTENT_TYPE",
    "MANTLE_SIGNING_SERVICE",
    "SIGNING_SERVICE",
    "STATUS_BY_TYPE",
    "BedrockError",
    "BedrockFailure",
    "EventStreamError",
    "EventStreamToSse",
    "FieldPath",
    "Frame",
    "FrameDecoder",
    "HeaderValue",
    "InvokeRoute",
    "SseToEventStream",
    "anthropic_body",
    "anthropic_error_type",
    "bedrock_body",
    "betas_from_header",
    "chunk_frame",
    "default_base_url",
    "describe",
    "encode_frame",
    "error_response",
    "error_type_of",
    "exception_frame",
    "invoke_url",
    "mantle_base_url",
    "model_path_segment",
    "parse_error",
    "parse_exception",
    "parse_invoke_path",
    "sse_event",
    "without_betas",
    "without_fields",
]
