"""The pure half of in-place profile editing: what the TOML text would become after an edit.

Every function takes the file's text and returns new text (or reads from it); none touches the
disk, so the console's editor can run them on every keystroke to validate what a save would write.
`claudex.config.editing` re-exports the public names and adds the file operations around them;
its docstring states the editing rules these functions implement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Comment, Item, Table

from claudex.config.loader import parse_config
from claudex.config.model import ConfigError, ConfigIssue


class EditError(Exception):
    """The edit could not be made; the file was not changed."""


class ProfileNotFoundError(EditError, LookupError):
    """No `[[profiles]]` table has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no profile named {name!r}")
        self.name = name


def profile_names(text: str, *, file: str = "<config>") -> list[str]:
    """Names of the `[[profiles]]` tables, in file order (tables without a string name skipped)."""
    return [name for table in _profile_tables(_parse(text, file)) if (name := _name_of(table))]


def profile_from_text(text: str, name: str, *, file: str = "<config>") -> dict[str, Any]:
    """The profile's keys as written (plain Python values, nothing merged or defaulted)."""
    table = _find_profile(_parse(text, file), name)
    plain: dict[str, Any] = table.unwrap()
    return plain


def references_to(text: str, name: str, *, file: str = "<config>") -> list[str]:
    """Where `name` is referenced: profiles listing it as a backup, pools listing it as a
    member, `proxy.default_profile`, `[routes]` and `[router]` (`routes.background`,
    `router.profile`, `router.rules.code`).

    Lets a caller say what deleting or renaming the profile will also change.
    """
    doc = _parse(text, file)
    found = [
        owner
        for table in _profile_tables(doc)
        if (owner := _name_of(table)) is not None and owner != name
        and (name in _backups_of(table) or name in _members_of(table))
    ]
    if _default_profile(doc) == name:
        found.append("proxy.default_profile")
    found += [where for where, _, _ in _route_references(doc, name)]
    return found


def with_profile_updated(
    text: str, name: str, values: Mapping[str, Any], *, file: str = "<config>"
) -> str:
    """`text` with the profile's keys set (None removes a key); a new `name` renames everywhere."""
    doc = _parse(text, file)
    table = _find_profile(doc, name)
    for key, value in values.items():
        _set_key(table, key, value)
    new_name = values.get("name")
    if isinstance(new_name, str) and new_name != name:
        _rename_references(doc, name, new_name, skip=table)
    return doc.as_string()


def with_profile_added(text: str, values: Mapping[str, Any], *, file: str = "<config>") -> str:
    """`text` with a new `[[profiles]]` table appended; keys in the order given, None skipped."""
    doc = _parse(text, file)
    table = tomlkit.table()
    for key, value in values.items():
        if value is not None:
            table.add(key, _to_item(value))
    rendered = doc.as_string()
    if rendered.strip() and not rendered.endswith("\n\n"):
        table.trivia.indent = "\n"  # one blank line between tables, like the rest of the file
    profiles = doc.get("profiles")
    if profiles is None:
        profiles = tomlkit.aot()
        doc.append("profiles", profiles)
    if not isinstance(profiles, AoT):
        raise EditError("profiles are not written as [[profiles]] tables; edit the file by hand")
    profiles.append(table)
    return doc.as_string()


def with_profile_deleted(
    text: str, name: str, *, drop_references: bool = True, file: str = "<config>"
) -> str:
    """`text` without the profile's table (its own comments go with it).

    With `drop_references`, it is also removed from other profiles' `backup_providers`, a
    `[proxy] default_profile` naming it is removed (the first enabled profile becomes the default),
    and so are the routes and router rules naming it (a router whose classifier it was is turned
    off); without, such references make the result invalid.
    """
    doc = _parse(text, file)
    table = _find_profile(doc, name)
    profiles = doc["profiles"]
    assert isinstance(profiles, AoT)
    del profiles[next(i for i, item in enumerate(profiles) if item is table)]
    if drop_references:
        for other in _profile_tables(doc):
            backups = _backups_of(other)
            if name in backups:
                other["backup_providers"] = [b for b in backups if b != name]
            members = _members_of(other)
            if name in members:  # a pool: no longer a member (nor weighted)
                other["members"] = [m for m in members if m != name]
                weights = other.get("weights")
                if isinstance(weights, MutableMapping) and name in weights:
                    del weights[name]
        if _default_profile(doc) == name:
            proxy = doc["proxy"]
            del proxy["default_profile"]
        for where, holder, key in _route_references(doc, name):
            del holder[key]
            if where == "router.profile" and holder.get("enabled") is True:
                holder["enabled"] = False  # no classifier left to ask
    return doc.as_string()


# ---------------------------------------------------------------------------------------------
# Internals

def _parse(text: str, file: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError:
        # Let the loader say where the problem is, in the words `claudex check` uses.
        parse_config(text, file)
        # tomlkit refused what tomllib accepts: rare, and nothing better to point at.
        raise ConfigError(
            [ConfigIssue(file, None, "syntax", "the file cannot be edited in place")]
        ) from None


def _profile_tables(doc: tomlkit.TOMLDocument) -> list[Table]:
    profiles = doc.get("profiles")
    if profiles is None:
        return []
    if not isinstance(profiles, AoT):
        raise EditError("profiles are not written as [[profiles]] tables; edit the file by hand")
    return list(profiles)


def _name_of(table: Table) -> str | None:
    name = table.get("name")
    return str(name) if isinstance(name, str) else None


def _find_profile(doc: tomlkit.TOMLDocument, name: str) -> Table:
    # The first of duplicates, like the loader.
    for table in _profile_tables(doc):
        if _name_of(table) == name:
            return table
    raise ProfileNotFoundError(name)


def _backups_of(table: Table) -> list[str]:
    backups = table.get("backup_providers")
    if not isinstance(backups, list):
        return []
    return [str(b) for b in backups if isinstance(b, str)]


def _members_of(table: Table) -> list[str]:
    """A pool's `members` (a provider's table has none)."""
    members = table.get("members")
    if not isinstance(members, list):
        return []
    return [str(m) for m in members if isinstance(m, str)]


def _default_profile(doc: tomlkit.TOMLDocument) -> str | None:
    proxy = doc.get("proxy")
    if not isinstance(proxy, Mapping):
        return None
    default = proxy.get("default_profile")
    return str(default) if isinstance(default, str) else None


def _rename_references(doc: tomlkit.TOMLDocument, old: str, new: str, *, skip: Table) -> None:
    for table in _profile_tables(doc):
        if table is skip:
            continue
        backups = table.get("backup_providers")
        if isinstance(backups, list):
            for index, backup in enumerate(backups):
                if backup == old:
                    backups[index] = new  # item by item: the array keeps its layout
        members = table.get("members")
        if isinstance(members, list):
            for index, member in enumerate(members):
                if member == old:
                    members[index] = new
            weights = table.get("weights")
            if isinstance(weights, MutableMapping) and old in weights:
                weights[new] = weights.pop(old)
    if _default_profile(doc) == old:
        doc["proxy"]["default_profile"] = new
    for _, holder, key in _route_references(doc, old):
        holder[key] = new  # tomlkit keeps the line's trailing comment


def _route_references(doc: tomlkit.TOMLDocument,
                      name: str) -> list[tuple[str, MutableMapping[str, Any], str]]:
    """Where `[routes]` and `[router]` name the profile: (label, table, key)."""
    found: list[tuple[str, MutableMapping[str, Any], str]] = []
    routes = doc.get("routes")
    if isinstance(routes, MutableMapping):
        found += [(f"routes.{key}", routes, key) for key, value in routes.items()
                  if value == name and key != "long_context_tokens"]
    router = doc.get("router")
    if isinstance(router, MutableMapping):
        if router.get("profile") == name:
            found.append(("router.profile", router, "profile"))
        rules = router.get("rules")
        if isinstance(rules, MutableMapping):
            found += [(f"router.rules.{key}", rules, key) for key, value in rules.items()
                      if value == name]
    return found


def _set_key(table: Table, key: str, value: Any) -> None:
    if value is None:
        if key in table:
            del table[key]
        return
    if key in table:
        if not _same(table[key], value):
            table[key] = _to_item(value)  # tomlkit keeps the line's trivia (trailing comment)
        return
    _insert_key(table, key, _to_item(value))


def _insert_key(table: Table, key: str, item: Item) -> None:
    body = table.value.body
    position = _insert_position(body, key)
    plain = [entry for k, entry in body if k is not None and not isinstance(entry, Table | AoT)]
    if plain:
        # Match the profile's indentation.
        item.trivia.indent = plain[-1].trivia.indent
    if position >= len(body):
        table.add(key, item)
    else:
        # tomlkit has no public insert; `_insert_at` keeps its key map consistent.
        _insert_at(table.value, position, key, item)


def _insert_at(container: Container, position: int, key: str, item: Item) -> None:
    container._insert_at(position, key, item)


def _insert_position(body: Sequence[tuple[Any, Item]], key: str) -> int:
    """Where a new key goes: after `# key = ...`, else after the last key; before sub-tables."""
    first_table = next(
        (i for i, (k, item) in enumerate(body) if k is not None and isinstance(item, Table | AoT)),
        len(body),
    )
    example = re.compile(rf"#\s*{re.escape(key)}\s*=")
    for index, (k, item) in enumerate(body[:first_table]):
        if k is None and isinstance(item, Comment) and example.match(item.as_string().strip()):
            return index + 1
    last_key = max((i for i, (k, _) in enumerate(body[:first_table]) if k is not None), default=-1)
    return last_key + 1 if last_key >= 0 else first_table


def _same(current: Any, new: Any) -> bool:
    """Equal as TOML values: True is not 1, but 30 is 30.0."""
    old = current.unwrap() if isinstance(current, Item) else current
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool) and old == new
    if isinstance(new, tuple):
        new = list(new)
    if isinstance(new, Mapping):
        new = dict(new)
    return bool(type(old) is type(new) or {type(old), type(new)} <= {int, float}) and old == new


def _to_item(value: Any) -> Item:
    if isinstance(value, Mapping):
        return _inline_table(value)
    if isinstance(value, list | tuple | str | bool | int | float):
        item: Item = tomlkit.item(list(value) if isinstance(value, tuple) else value)
        return item
    raise TypeError(f"cannot write a {type(value).__name__} to the config file")


def _inline_table(values: Mapping[str, Any]) -> Item:
    # Rendered as `{ a = "x", b = "y" }`, the spacing the example file uses; tomlkit's own
    # inline tables come out as `{a = "x"}`. Each pair is dumped by tomlkit, so quoting is right.
    pairs = [tomlkit.dumps({key: value}).strip() for key, value in values.items()]
    source = "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    item: Item = tomlkit.parse(f"value = {source}\n")["value"]
    return item
