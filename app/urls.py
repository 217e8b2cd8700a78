"""Public URLs of resources, built from the community's base URL (decisions.md, "Shapes")."""

from __future__ import annotations

from app.markup.html import slugify


def user_url(base: str, user_id: int, username: str) -> str:
    return f"{base}/users/{user_id}-{username.lower()}"


def user_tooltip_url(base: str, user_id: int, username: str) -> str:
    return f"{base}/api/users/{user_id}-{username.lower()}.json"


def group_url(base: str, group_id: int, groupname: str) -> str:
    return f"{base}/groups/{group_id}-{groupname.lower()}"


def message_slug(message_id: int, title: str | None) -> str:
    slug = slugify(title) if title else ""
    return f"{message_id}-{slug}" if slug else str(message_id)


def message_url(base: str, message_id: int, title: str | None) -> str:
    return f"{base}/api/messages/{message_slug(message_id, title)}"


def message_permalink(base: str, message_id: int, title: str | None) -> str:
    return f"{base}/messages/{message_slug(message_id, title)}"


def comment_url(base: str, message_id: int, comment_id: int) -> str:
    return f"{base}/api/messages/{message_id}/comments/{comment_id}"


def comment_permalink(base: str, message_id: int, title: str | None, comment_id: int) -> str:
    return f"{comment_permalinks(base, message_id, title)}{comment_id}"


def comment_permalinks(base: str, message_id: int, title: str | None) -> str:
    """What the permalinks of a message's comments start with (their id follows)."""
    return f"{base}/messages/{message_slug(message_id, title)}/comments/"


def topic_url(base: str, name: str) -> str:
    return f"{base}/topics/{name}"


def attachment_url(base: str, attachment_id: int) -> str:
    return f"{base}/attachments/{attachment_id}"


def asset_url(base: str, path: str) -> str:
    return f"{base}/assets/{path}"


def external_system_url(base: str, system_id: int, name: str) -> str:
    slug = slugify(name)
    return f"{base}/external_systems/{system_id}-{slug}" if slug else \
        f"{base}/external_systems/{system_id}"


def reach_extension_url(base: str, extension_id: int) -> str:
    return f"{base}/api/reach_extensions/{extension_id}"


def reach_extension_permalink(base: str, extension_id: int) -> str:
    return f"{base}/reach_extensions/{extension_id}"


def webhook_url(base: str, identifier: str, secret: str) -> str:
    """The incoming address of a group webhook: it carries the secret."""
    return f"{base}/api/webhooks/{identifier}/{secret}"
