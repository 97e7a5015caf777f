"""Claudex's `[router]`: each conversation is classified once, by asking a profile, into one of
`[router.rules]`' categories; the category's profile serves every turn of it (DESIGN.md "Routes").

Claudex (the Rust project, src/router/) asks its classifier on every request, with the last user
message, a fixed list of five categories (code, analysis, creative, search, math) and
`max_tokens = 10`, and takes the lowercased answer. claudex asks once per conversation (its
first user message does not change, and one conversation kept on one provider keeps that
provider's prompt cache), names the categories the rules actually have, and remembers the
answer with the conversation (`claudex.engine.core.conversation`), bounded.

Any failure — no answer within `timeout_s` (2 s), an error, an answer that names no category —
routes the conversation to `rules.default` (None: the default profile), and that is remembered
too: a classifier that is down must not cost every turn two seconds. Requests of a conversation
that is being classified wait for the one question instead of each asking.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from claudex.config.model import Protocol, RouterSettings
from claudex.engine.core.addressing import credentials_only
from claudex.engine.core.conversation import conversation_of, prompt_start

log = logging.getLogger("claudex.engine")

TIMEOUT_S: Final = 2.0
CAPACITY: Final = 20_000
"""Conversations remembered (an entry is ~200 bytes): weeks of a busy user's sessions."""
QUESTION_CHARS: Final = 4_000
"""The part of the first user message the classifier reads."""
# Claude Code puts the context it adds to a user turn (CLAUDE.md, reminders) in these tags,
# before the user's own words: not what the conversation is about.
_REMINDER: Final = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_WORD: Final = re.compile(r"[a-z0-9][a-z0-9_-]*")

Ask = Callable[[str, Mapping[str, str]], Awaitable[str]]
"""Put the question (the first user message) to the classifier, with the client's credentials
(for a passthrough classifier profile); its answer's text. Raises on any failure (a sentence
in the exception)."""


@dataclass(frozen=True)
class Decision:
    category: str        # a rule name; "default" when the classifier could not place it
    profile: str | None  # the rule's profile; None: the default profile serves
    why: str = ""        # for a fallback: what went wrong


class IntentRouter:
    def __init__(self, settings: RouterSettings, ask: Ask, *, timeout_s: float = TIMEOUT_S,
                 capacity: int = CAPACITY) -> None:
        self.settings = settings
        self._ask = ask
        self.timeout_s = timeout_s
        self.capacity = capacity
        self._known: OrderedDict[str, Decision] = OrderedDict()
        self._asking: dict[str, asyncio.Future[Decision]] = {}  # conversation -> question

    def __len__(self) -> int:
        return len(self._known)

    async def decide(self, protocol: Protocol, headers: Mapping[str, str],
                     body: Mapping[str, Any]) -> Decision:
        """The category of the request's conversation, asked for at its first sight."""
        key = conversation_of(protocol, headers, body).key
        known = self._known.get(key)
        if known is not None:
            self._known.move_to_end(key)
            return known
        asking = self._asking.get(key)
        if asking is None:
            question = first_user_words(protocol, body)
            if not question:  # nothing to classify (yet): not remembered, nor logged
                return Decision("default", self.settings.default, "no user text to classify")
            # A task of its own: a client that leaves does not cancel the question the other
            # turns of its conversation wait for.
            asking = asyncio.ensure_future(self._classify_and_remember(
                key, question, credentials_only(headers)))
            self._asking[key] = asking
        return await asyncio.shield(asking)

    async def _classify_and_remember(self, key: str, question: str,
                                     credentials: Mapping[str, str]) -> Decision:
        try:
            decision = await self._classify(question, credentials)
            self._remember(key, decision)
            return decision
        finally:
            del self._asking[key]

    async def _classify(self, question: str, credentials: Mapping[str, str]) -> Decision:
        who = self.settings.profile
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self._ask(question, credentials)
        except TimeoutError:
            return self._fallback(f"classifier {who} did not answer within "
                                  f"{self.timeout_s:g} s")
        except Exception as exc:
            return self._fallback(f"classifier {who} failed: {exc}")
        category = category_in(answer, self.settings.categories)
        if category is None:
            shown = answer.strip()[:40] or "nothing"
            return self._fallback(f"classifier {who} answered {shown!r}, not a category")
        return Decision(category, self.settings.rules[category])

    def _fallback(self, why: str) -> Decision:
        decision = Decision("default", self.settings.default, why)
        log.info("router: %s; the conversation goes to %s", why,
                 decision.profile or "the default profile")
        return decision

    def _remember(self, key: str, decision: Decision) -> None:
        self._known[key] = decision
        while len(self._known) > self.capacity:
            self._known.popitem(last=False)


def category_in(answer: str, categories: tuple[str, ...]) -> str | None:
    """The first word of `answer` that is a category (case and punctuation ignored)."""
    wanted = {category.lower(): category for category in categories}
    for word in _WORD.findall(answer.lower()):
        if word in wanted:
            return wanted[word]
    return None


def first_user_words(protocol: Protocol, body: Mapping[str, Any]) -> str:
    """The first user message's own words, without Claude Code's reminders, bounded."""
    _, first = prompt_start(protocol, body, limit=64 * 1024)
    return _REMINDER.sub("", first).strip()[:QUESTION_CHARS]


def classifier_prompt(categories: tuple[str, ...]) -> str:
    """The classifier's instructions (claudex's own words): the categories, one word back."""
    lines = [f"- {name}: {_MEANINGS[name]}" if name in _MEANINGS else f"- {name}"
             for name in categories]
    return ("You route conversations with a coding assistant to the model best suited to "
            "them. Read the first message of a conversation and decide which one of these "
            "categories it belongs to:\n" + "\n".join(lines) + "\n"
            "Reply with the category's name alone, in lowercase: one word, no explanation.")


# What Claudex's five categories mean, said our way (others are shown by name alone).
_MEANINGS: Final = {
    "code": "writing, changing, fixing or running code",
    "analysis": "reviewing code, explaining a project, discussing its design",
    "creative": "writing prose, brainstorming, naming things",
    "search": "questions that need current information from the web",
    "math": "calculation, proofs, quantitative reasoning",
}
