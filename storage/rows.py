"""The rows storage hands to app/render, typed: a renderer reading a column its row does not
have is a mypy error, not a KeyError at run time.

Each type lists the columns of one SELECT list (named beside it). At run time the rows stay
asyncpg Records (read by key only, never copied): storage `cast`s what it returns, and the
renderers take these types.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, TypedDict


class NameRow(TypedDict):
    """What a user's display name is made of."""

    username: str
    first_name: str
    last_name: str


class EmbeddedUserRow(NameRow):
    """What the embedded forms of a user read: a BASIC row has it, and a FULL row's `manager`
    is exactly it (storage.users.MANAGER_FIELDS)."""

    id: int
    role: str
    state: str
    title: str | None
    company_login: str | None
    out_of_office: bool
    back_in_office_on: date | None
    avatar_id: int | None


class UserRow(EmbeddedUserRow):
    """storage.users.BASIC."""

    community_id: int
    email: str
    manager_id: int | None
    status_message: str | None
    contact_info: dict[str, Any] | None


class MentionableUserRow(UserRow):
    """storage.messages.MENTIONABLE's user rows: BASIC with `kind` 'user' and `name`."""

    kind: str
    name: str


class FullFormRow(EmbeddedUserRow):
    """What app.render.users.full_user reads of a FULL or LISTED row (it is handed the
    contact_info, manager and custom fields rendered)."""

    email: str
    status_message: str | None
    following_count: int
    followers_count: int
    viewer_follows: bool


class FullUserRow(UserRow):
    """storage.users.FULL: BASIC with follow counts, the manager and custom field values."""

    following_count: int
    followers_count: int
    viewer_follows: bool
    manager: Any  # a record of MANAGER_FIELDS, or None
    custom_values: list[list[Any]] | None


class ListedUserRow(FullFormRow):
    """storage.users.LISTED_BY_IDS: FULL_FLAT with contact_info and custom_values as JSON text,
    and the versions of storage.users.KEYS."""

    community_id: int
    manager_id: int | None
    contact_info: str | None
    mgr_id: int | None
    mgr_username: str | None
    mgr_first_name: str | None
    mgr_last_name: str | None
    mgr_role: str | None
    mgr_state: str | None
    mgr_title: str | None
    mgr_company_login: str | None
    mgr_out_of_office: bool | None
    mgr_back_in_office_on: date | None
    mgr_avatar_id: int | None
    custom_values: str | None
    row_version: int
    values_version: int | None
    directory_version: int | None


class ListedKeyRow(TypedDict):
    """storage.users.KEYS: what a users list page's kept full form is keyed by."""

    id: int
    row_version: int
    values_version: int | None
    directory_version: int | None
    following_count: int
    followers_count: int
    viewer_follows: bool


class ShortGroupRow(TypedDict):
    """storage.groups.SHORT_COLUMNS."""

    id: int
    name: str
    groupname: str
    permission: str
    chat_enabled: bool
    post_enabled: bool
    avatar_id: int | None
    state: str


class FeedGroupRow(ShortGroupRow):
    """storage.messages.GROUPS: a short group with the viewer's role and whether they see it."""

    viewer_role: str | None
    listed: bool


class GroupRow(ShortGroupRow):
    """storage.groups.FULL."""

    community_id: int
    description: str | None
    allow_access_request: bool
    group_type: str
    creator_id: int | None
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None
    post_stream_id: int | None
    chat_stream_id: int | None
    member_count: int
    admin_ids: list[int]
    viewer_role: str | None
    viewer_requested: bool
    chat_read: Any  # json of the viewer's chat state, or None


class AccessGroupRow(GroupRow):
    """storage.groups.BY_ID: with whether the viewer may read and see it."""

    readable: bool
    listed: bool

class MessageRow(TypedDict):
    """storage.messages.ROW (COLUMNS and COMPUTED)."""

    id: int
    community_id: int
    user_id: int
    group_id: int | None
    external_system_id: int | None
    title: str | None
    body: str
    html_body: str
    action: str | None
    verb: str
    message_type: str | None
    external_url: str | None
    source: str | None
    is_announcement: bool
    days_of_stickiness: int | None
    sticky_until: datetime | None
    shared_message_id: int | None
    client_provided_guid: str | None
    external_resource_ids: list[int] | None
    extensions: Any
    last_interacted_at: datetime
    created_at: datetime
    updated_at: datetime
    comments_count: int
    likes_count: int
    share_count: int
    viewer_flag_id: int | None
    hidden: bool
    sticky: bool | None
    group_state: str | None
    group_permission: str | None
    group_post_enabled: bool | None
    viewer_group_role: str | None


class ReadableMessageRow(MessageRow):
    """storage.messages.BY_ID: with whether the viewer may read it."""

    readable: bool


class NewMessageRow(MessageRow):
    """storage.messages.INSERT_FULL: with its tags' names, sorted."""

    tag_names: list[str]


class CommentRow(TypedDict):
    """storage.comments.COLUMNS."""

    id: int
    community_id: int
    message_id: int
    user_id: int
    text: str
    html_body: str
    external_resource_ids: list[int] | None
    created_at: datetime
    updated_at: datetime
    likes_count: int


class LatestCommentRow(CommentRow):
    """storage.comments.LATEST_OF_MESSAGES: with its recipients, tags and attachments' flag."""

    recipient_user_ids: list[int | None] | None
    recipient_group_ids: list[int | None] | None
    tag_names: list[str] | None
    has_attachments: bool


class MessageExtrasRow(TypedDict):
    """storage.messages.EXTRAS."""

    id: int
    recipient_user_ids: list[int | None] | None
    recipient_group_ids: list[int | None] | None
    tag_names: list[str] | None
    poll_id: int | None
    has_attachments: bool


class NewCommentRow(CommentRow):
    """storage.comments.INSERT: with its tags' names, sorted."""

    tag_names: list[str]


class ConversationRow(TypedDict):
    """storage.conversations._CONVERSATION."""

    id: int
    community_id: int
    name: str | None
    private: bool
    member_set_key: str | None
    creator_id: int | None
    latest_activity_id: int | None
    last_activity_at: datetime | None
    created_at: datetime
    updated_at: datetime
    private_history_end: int | None


class MemberConversationRow(ConversationRow):
    """storage.conversations.MEMBER_VIEW: the conversation as one member sees it."""

    unread_count: int
    hidden: bool
    last_read_activity_id: int | None
    joined_at: datetime
    visible_from_activity_id: int


class ActivityRow(TypedDict):
    """storage.activities.COLUMNS: a conversation activity with its actor."""

    id: int
    community_id: int
    conversation_id: int
    actor_id: int
    verb: str
    text: str | None
    html: str | None
    longitude: float | None
    latitude: float | None
    client_provided_guid: str | None
    shared_message_id: int | None
    created_at: datetime
    actor_first_name: str
    actor_last_name: str
    actor_username: str
    actor_avatar_id: int | None
    actor_state: str
