"""Content pieces: Anthropic content blocks <-> OpenAI content parts (text, images, documents).

Images: Anthropic `{"type":"image","source":{"type":"base64","media_type","data"}}` or
`{"source":{"type":"url","url"}}` <-> OpenAI `{"type":"image_url","image_url":{"url"}}` where the
URL is either `data:<media type>;base64,<data>` or an http(s) address.
Documents: a base64 PDF <-> an OpenAI `file` part carrying `file_data` as a data URL; a plain-text
document becomes a text part. Anything else (file ids, URL documents, audio) has no counterpart
and is dropped and listed.
"""

from __future__ import annotations

from typing import Any

from claudex.providers.translate.drops import Drops

DEFAULT_PDF_NAME = "document.pdf"


def note_block_extras(block: dict[str, Any], drops: Drops) -> None:
    """List Anthropic-only decorations of a block that the OpenAI side cannot carry."""
    if block.get("cache_control") is not None:
        drops.add("cache_control")
    if block.get("citations"):
        drops.add("citations")


# Server tool calls and results: they ran inside Anthropic's API, with nothing to answer them
# on the other side (tool_result, the client's own tool results, is not one of them).
_SERVER_TOOL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "container_upload"})


def note_unconverted_block(kind: Any, drops: Drops) -> None:
    """Name a content block the OpenAI side has no form for."""
    if kind == "thinking":
        drops.add("thinking")
    elif kind == "redacted_thinking":
        drops.add("redacted_thinking")
    elif kind in _SERVER_TOOL_BLOCKS or (isinstance(kind, str) and kind.endswith("_tool_result")):
        drops.add("server_tool_blocks")
    else:
        drops.unknown(f"content.{kind}")


def text_of_blocks(content: Any, joiner: str = "\n\n") -> str:
    """The text of an Anthropic content value: a string, or the text blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return joiner.join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def text_of_parts(content: Any, joiner: str = "\n\n") -> str:
    """The text of an OpenAI content value: a string, or the text (and refusal) parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces: list[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in ("text", "refusal"):
            pieces.append(str(part.get("text", part.get("refusal", ""))))
    return joiner.join(pieces)


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def parse_data_url(url: str) -> tuple[str, str] | None:
    """`data:<media type>;base64,<data>` -> (media type, data); None for any other form."""
    if not url.startswith("data:"):
        return None
    header, sep, data = url[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    media_type = header[: -len(";base64")].split(";")[0]
    return (media_type or "application/octet-stream"), data


# -- Anthropic -> OpenAI ---------------------------------------------------------------------

def image_block_to_openai(block: dict[str, Any], drops: Drops) -> dict[str, Any] | None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64" and source.get("data"):
        url = data_url(str(source.get("media_type") or "image/png"), str(source["data"]))
    elif kind == "url" and source.get("url"):
        url = str(source["url"])
    else:
        drops.add("image_source")
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def document_block_to_openai(block: dict[str, Any], drops: Drops) -> dict[str, Any] | None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64" and source.get("media_type") == "application/pdf":
        filename = str(block.get("title") or DEFAULT_PDF_NAME)
        return {"type": "file", "file": {
            "filename": filename, "file_data": data_url("application/pdf", str(source["data"])),
        }}
    if kind == "text":
        return {"type": "text", "text": str(source.get("data", ""))}
    if kind == "content":
        return {"type": "text", "text": text_of_blocks(source.get("content"))}
    drops.add("document_source")
    return None


def user_block_to_openai(block: Any, drops: Drops) -> dict[str, Any] | None:
    """One block of a user turn (not a tool_result) as an OpenAI content part, or None."""
    if not isinstance(block, dict):
        drops.add("malformed")
        return None
    note_block_extras(block, drops)
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image":
        return image_block_to_openai(block, drops)
    if kind == "document":
        return document_block_to_openai(block, drops)
    note_unconverted_block(kind, drops)
    return None


# -- OpenAI -> Anthropic ---------------------------------------------------------------------

def image_part_to_anthropic(part: dict[str, Any], drops: Drops) -> dict[str, Any] | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        drops.add("image_url")
        return None
    if isinstance(image, dict) and image.get("detail") not in (None, "auto"):
        drops.add("image_detail")
    parsed = parse_data_url(url)
    if parsed is not None:
        media_type, data = parsed
        return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                            "data": data}}
    if url.startswith("data:"):
        drops.add("image_url")  # a data URL that is not base64
        return None
    return {"type": "image", "source": {"type": "url", "url": url}}


def file_part_to_anthropic(part: dict[str, Any], drops: Drops) -> dict[str, Any] | None:
    file = part.get("file") or {}
    parsed = parse_data_url(str(file.get("file_data") or ""))
    if parsed is None or parsed[0] != "application/pdf":
        # File ids live in OpenAI's file store; other media types have no Anthropic document.
        drops.add("file")
        return None
    block: dict[str, Any] = {"type": "document",
                             "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": parsed[1]}}
    if file.get("filename") and file["filename"] != DEFAULT_PDF_NAME:
        block["title"] = file["filename"]
    return block


def part_to_anthropic(part: Any, drops: Drops) -> dict[str, Any] | None:
    """One OpenAI content part as an Anthropic block, or None (dropped; empty text skipped)."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, dict):
        drops.add("malformed")
        return None
    kind = part.get("type")
    if kind in ("text", "refusal"):
        text = str(part.get("text", part.get("refusal", "")) or "")
        # Anthropic rejects empty text blocks; an empty part carries no meaning to keep.
        return {"type": "text", "text": text} if text else None
    if kind == "image_url":
        return image_part_to_anthropic(part, drops)
    if kind == "file":
        return file_part_to_anthropic(part, drops)
    if kind == "input_audio":
        drops.add("input_audio")
    else:
        drops.unknown(f"content.{kind}")  # a newer part type
    return None


def parts_to_anthropic(content: Any, drops: Drops) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return []
    blocks = [part_to_anthropic(part, drops) for part in content]
    return [b for b in blocks if b is not None]
