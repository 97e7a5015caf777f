"""Bedrock, Vertex and aws-sigv4 profiles in the config file (issue 37): their keys, their
defaults, every problem with its file, line and key, and `claudex check` naming the extra to
install when one is missing."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest

from claudex.config import ConfigError, clouds, parse_config
from tests.paths import EXAMPLE

BEDROCK = """\
[[profiles]]
name = "bedrock"
provider_type = "Bedrock"
region = "us-east-1"
default_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
"""
VERTEX = """\
[[profiles]]
name = "vertex"
provider_type = "Vertex"
region = "global"
project = "my-project"
default_model = "claude-sonnet-4-5@20250929"
"""
MANTLE = """\
[[profiles]]
name = "mantle"
provider_type = "DirectAnthropic"
base_url = "https://bedrock-mantle.eu-west-3.api.aws/anthropic"
auth_type = "aws-sigv4"
"""


def issues(text: str, env: dict[str, str] | None = None) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "t.toml", env=env or {})
    return [(i.line, i.key, i.message) for i in caught.value.issues]


def test_a_bedrock_profile_takes_its_address_from_its_region_and_speaks_anthropic() -> None:
    [profile] = parse_config(BEDROCK, env={}).profiles
    assert profile.base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert (profile.protocol, profile.region, profile.problem) == ("anthropic", "us-east-1", None)
    assert clouds.signs_sigv4(profile, {})  # no key anywhere: the AWS chain, signed
    assert not clouds.signs_sigv4(profile, {"AWS_BEARER_TOKEN_BEDROCK": "k"})
    keyed = parse_config(BEDROCK + 'api_key_env = "MY_BEDROCK_KEY"\n', env={}).profiles[0]
    assert not clouds.signs_sigv4(keyed, {})
    assert keyed.problem == "environment variable MY_BEDROCK_KEY is not set"
    forced = parse_config(BEDROCK + 'auth_type = "aws-sigv4"\naws_profile = "work"\n',
                          env={"AWS_BEARER_TOKEN_BEDROCK": "k"}).profiles[0]
    assert clouds.signs_sigv4(forced, {"AWS_BEARER_TOKEN_BEDROCK": "k"})
    assert (forced.aws_profile, clouds.sigv4_service(forced)) == ("work", "bedrock")


@pytest.mark.parametrize(("region", "base"), [
    ("us-east5", "https://us-east5-aiplatform.googleapis.com/v1"),
    ("global", "https://aiplatform.googleapis.com/v1"),
    ("eu", "https://aiplatform.eu.rep.googleapis.com/v1"),
])
def test_a_vertex_profile_takes_its_address_from_its_region(region: str, base: str) -> None:
    [profile] = parse_config(VERTEX.replace('"global"', f'"{region}"'), env={}).profiles
    assert (profile.base_url, profile.project, profile.protocol) == (base, "my-project",
                                                                     "anthropic")
    assert profile.problem is None and clouds.uses_google_auth(profile)


def test_an_explicit_base_url_wins_over_the_region() -> None:
    text = BEDROCK + 'base_url = "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com/"\n'
    [profile] = parse_config(text, env={}).profiles
    assert profile.base_url == "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com"


def test_an_aws_sigv4_direct_anthropic_profile_signs_for_bedrock_mantle() -> None:
    [profile] = parse_config(MANTLE, env={}).profiles
    assert (profile.protocol, profile.problem) == ("anthropic", None)
    assert clouds.signs_sigv4(profile, {})
    assert (clouds.sigv4_service(profile), clouds.sigv4_region(profile)) == (
        "bedrock-mantle", "eu-west-3")
    custom = parse_config(MANTLE + 'region = "us-west-2"\naws_service = "other"\n',
                          env={}).profiles[0]
    assert (clouds.sigv4_service(custom), clouds.sigv4_region(custom)) == ("other", "us-west-2")


@pytest.mark.parametrize(("text", "line", "key", "words"), [
    (BEDROCK.replace('region = "us-east-1"\n', ""), 1, "profiles.bedrock.region",
     'a Bedrock profile\'s address and credentials name its region ("us-east-1")'),
    (VERTEX.replace('project = "my-project"\n', ""), 1, "profiles.vertex.project",
     "the Google Cloud project"),
    (BEDROCK.replace('"us-east-1"', '"US East 1"'), 4, "profiles.bedrock.region",
     '"US East 1" is not a region name'),
    (BEDROCK + 'auth_type = "oauth"\n', 6, "profiles.bedrock.auth_type",
     'a Bedrock profile authenticates with a Bedrock API key (api_key_env) or AWS credentials, '
     'not auth_type "oauth"'),
    (VERTEX + 'api_key_env = "GOOGLE_KEY"\n', 7, "profiles.vertex.api_key_env",
     "a Vertex profile takes Google credentials"),
    (BEDROCK + 'credentials_file = "x.json"\n', 6, "profiles.bedrock.credentials_file",
     "a Bedrock profile takes a Bedrock API key"),
    ('[[profiles]]\nname = "x"\nprovider_type = "OpenAICompatible"\nbase_url = "https://a/v1"\n'
     'region = "us-east-1"\n', 5, "profiles.x.region", "only Bedrock, Vertex and auth_type"),
    ('[[profiles]]\nname = "x"\nprovider_type = "OpenAICompatible"\nbase_url = "https://a/v1"\n'
     'auth_type = "aws-sigv4"\n', 5, "profiles.x.auth_type", "only for Bedrock profiles and "
     "DirectAnthropic"),
    (BEDROCK + 'project = "p"\n', 6, "profiles.bedrock.project",
     "only Vertex profiles have a project"),
    (VERTEX + 'aws_profile = "work"\n', 7, "profiles.vertex.aws_profile",
     'only Bedrock and auth_type "aws-sigv4" profiles use AWS credentials'),
    (MANTLE.replace("eu-west-3.api.aws", "example.com"), 1, "profiles.mantle.region",
     "the base_url names no AWS region"),
    (BEDROCK + 'aws_profile = "a b"\n', 6, "profiles.bedrock.aws_profile",
     "must not contain spaces"),
])
def test_each_problem_names_file_line_and_key(text: str, line: int, key: str,
                                              words: str) -> None:
    found = issues(text)
    assert any(found_line == line and found_key == key and words in message
               for found_line, found_key, message in found), found
    assert all(found_line is not None for found_line, _, _ in found)


def test_a_missing_vertex_credentials_file_leaves_the_profile_loaded_but_unusable(
        tmp_path: Path) -> None:
    text = VERTEX + f'credentials_file = "{tmp_path / "sa.json"}"\n'
    [profile] = parse_config(text, env={}).profiles
    assert profile.problem == f"credentials file {tmp_path / 'sa.json'} not found"
    (tmp_path / "sa.json").write_text("{}")
    assert parse_config(text, env={}).profiles[0].problem is None
    with_command = VERTEX + 'credentials_file = "~/nope.json"\ntoken_command = "printf t"\n'
    assert parse_config(with_command, env={"HOME": str(tmp_path)}).profiles[0].problem is None


def test_a_missing_extra_makes_the_profile_unusable_with_the_install_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clouds, "_installed", lambda module: False)
    bedrock, vertex, mantle = parse_config(BEDROCK + VERTEX + MANTLE, env={}).profiles
    assert bedrock.problem is not None and "pip install 'claudex[bedrock]'" in bedrock.problem
    assert mantle.problem is not None and "pip install 'claudex[bedrock]'" in mantle.problem
    assert vertex.problem is not None and "pip install 'claudex[vertex]'" in vertex.problem
    # A Bedrock API key needs neither; a token_command needs no google-auth.
    env = {"AWS_BEARER_TOKEN_BEDROCK": "key"}
    assert parse_config(BEDROCK, env=env).profiles[0].problem is None
    keyed = BEDROCK + 'api_key_env = "MY_KEY"\n'
    assert parse_config(keyed, env={"MY_KEY": "k"}).profiles[0].problem is None
    assert parse_config(VERTEX + 'token_command = "printf t"\n', env={}).profiles[0].problem \
        is None


async def test_claudex_check_says_the_install_command_when_botocore_is_missing(
        tmp_path: Path) -> None:
    path = tmp_path / "clouds.toml"
    path.write_text(BEDROCK + VERTEX)
    # botocore and google-auth as if not installed: None in sys.modules makes find_spec say so.
    script = ("import sys; sys.modules['botocore'] = None; sys.modules['google.auth'] = None; "
              "from claudex.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, "--config", str(path), "check",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "400"})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    text = re.sub(r"\s+", " ", out.decode())
    assert proc.returncode == 0, err.decode()
    assert "pip install 'claudex[bedrock]'" in text and "pip install 'claudex[vertex]'" in text
    assert "Traceback" not in out.decode() + err.decode()


def test_a_cloud_profile_without_its_model_names_is_advised() -> None:
    config = parse_config(BEDROCK.replace("default_model", "# default_model"), env={})
    [warning] = config.warnings
    assert warning.key == "profiles.bedrock.default_model"
    assert "Bedrock names Claude models its own way" in warning.message
    mapped = VERTEX.replace("default_model", "# default_model") + (
        'models = { haiku = "claude-haiku-4-5@20251001", sonnet = "claude-sonnet-4-5@20250929", '
        'opus = "claude-opus-4-1@20250805" }\n')
    assert parse_config(mapped, env={}).warnings == ()


def test_the_examples_commented_cloud_profiles_load_once_uncommented(tmp_path: Path) -> None:
    """profiles.example.toml shows a Bedrock, a Vertex and a Bedrock Mantle profile commented
    out; uncommented, each is what `claudex check` accepts, without a warning."""
    text = EXAMPLE.read_text()
    start = text.index("# [[profiles]]\n# name = \"bedrock\"")
    end = text.index("# A pool:")
    block = "\n".join(line[2:] if re.match(r"^# ([a-z_]+ = |\[\[profiles\]\])", line) else line
                      for line in text[start:end].splitlines())
    credentials = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text("{}")
    config = parse_config(textwrap.dedent(block), env={"HOME": str(tmp_path),
                                                       "BEDROCK_API_KEY": "k"})
    assert [(p.name, p.provider_type, p.problem) for p in config.profiles] == [
        ("bedrock", "Bedrock", None), ("vertex", "Vertex", None),
        ("bedrock-mantle", "DirectAnthropic", None)]
    assert config.warnings == ()
