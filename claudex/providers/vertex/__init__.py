"""Claude on Google Vertex AI (DESIGN.md "Claude on clouds"): the URL (`urls`), the body
(`body`) and the errors (`errors`); the stream is plain Anthropic SSE. Access tokens come from
the engine (`claudex.engine.credentials.google_tokens`): nothing here does I/O or imports the
engine."""

from claudex.providers.vertex.body import (
    ANTHROPIC_VERSION,
    anthropic_body,
    count_tokens_body,
    vertex_body,
)
from claudex.providers.vertex.errors import (
    CODE_BY_STATUS,
    VertexError,
    VertexFailure,
    error_response,
    parse_error,
)
from claudex.providers.vertex.urls import (
    COUNT_TOKENS_MODEL,
    PredictRoute,
    count_tokens_url,
    default_base_url,
    parse_predict_path,
    predict_url,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "CODE_BY_STATUS",
    "COUNT_TOKENS_MODEL",
    "PredictRoute",
    "VertexError",
    "VertexFailure",
    "anthropic_body",
    "count_tokens_body",
    "count_tokens_url",
    "default_base_url",
    "error_response",
    "parse_error",
    "parse_predict_path",
    "predict_url",
    "vertex_body",
]
