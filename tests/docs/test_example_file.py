"""The reading of profiles.example.toml's comments that the configuration reference uses."""

from __future__ import annotations

import textwrap

from claudex.docs_gen.example_file import parse


def test_a_comment_above_a_key_is_its_meaning_and_a_blank_line_ends_it() -> None:
    found = parse(textwrap.dedent("""\
        # About the table.
        [proxy]
        # Where to listen,
        # on this machine.
        host = "127.0.0.1"

        port = 1
        """))
    assert found.tables == {"proxy": "About the table."}
    assert found.words("proxy", "host") == "Where to listen, on this machine."
    assert found.words("proxy", "port") == ""
    assert found.values[("proxy", "host")] == '"127.0.0.1"'


def test_keys_written_together_share_the_words_above_them() -> None:
    found = parse("[proxy]\n# Both timeouts.\na = 1\nb = 2\n# Its own.\nc = 3\n")
    assert [found.words("proxy", k) for k in "abc"] == ["Both timeouts.", "Both timeouts.",
                                                       "Its own."]


def test_commented_out_keys_and_tables_count_and_prose_does_not() -> None:
    found = parse(textwrap.dedent("""\
        # An optional table.
        # [fleet]
        # Where they meet.
        # redis_url = "redis://127.0.0.1:6379/0"
        [[profiles]]
        # The key itself. An empty
        # api_key = "" means no key at all.
        # api_key = "xai-..."
        # ----------------------------------
        # A rule line is not words.
        name = "x"
        """))
    assert found.tables["fleet"] == "An optional table."
    assert found.words("fleet", "redis_url") == "Where they meet."
    assert found.words("profiles", "api_key") == (
        'The key itself. An empty api_key = "" means no key at all.')
    assert found.words("profiles", "name") == "A rule line is not words."


def test_the_first_profile_to_describe_a_key_wins() -> None:
    found = parse("[[profiles]]\n# First.\nname = \"a\"\n[[profiles]]\n# Second.\nname = \"b\"\n")
    assert found.words("profiles", "name") == "First."
