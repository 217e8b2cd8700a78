"""The one explicit table of every route (`commons routes` prints it).

Paths are written as the interface spec writes them (`:name` parameters). Every path is also
served with a `.json` and a `.xml` suffix (app.xml_format answers XML for the latter), and a
path parameter may not contain `/`. A parameter where an id belongs matches only an id (`12`,
`12-slug`): any other segment is a 404, never a 405 from a neighbouring route. A create or
update names its body's root key (`root=`): an unwrapped body is read as if wrapped in it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

from app.params import BODY_ROOTS, BodyRoot, PageQuery
from app.views import attachments as attachment_views
from app.views import auth as auth_views
from app.views import badges as badge_views
from app.views import chat_messages as chat_views
from app.views import client_devices as client_device_views
from app.views import comments as comment_views
from app.views import community as community_views
from app.views import conversations as conversation_views
from app.views import custom_fields as custom_field_views
from app.views import external_systems as external_system_views
from app.views import flags as flag_views
from app.views import follows as follow_views
from app.views import groups as group_views
from app.views import likes as like_views
from app.views import meetings as meeting_views
from app.views import memberships as membership_views
from app.views import messages as message_views
from app.views import meta as meta_views
from app.views import notifications as notification_views
from app.views import polls as poll_views
from app.views import provisioning as provisioning_views
from app.views import reach_extensions as reach_extension_views
from app.views import realtime as realtime_views
from app.views import search as search_views
from app.views import streams as stream_views
from app.views import thanks as thanks_views
from app.views import topics as topic_views
from app.views import users as user_views
from app.views import webhooks as webhook_views

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str = ""
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    root: str | None = None


def _r(
    method: str,
    path: str,
    handler: Handler,
    summary: str = "",
    *,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    root: str | None = None,
) -> Route:
    return Route(method, path, handler, summary, body, query, root)


ROUTES: list[Route] = [
    # meta
    _r("GET", "/api/openapi", meta_views.openapi, "The OpenAPI 3.1 document of this API"),
    # authentication
    _r("POST", "/api/authentication", auth_views.authenticate, "Check credentials",
       body=auth_views.Credentials),
    _r("GET", "/api/userinfo", auth_views.userinfo, "The authenticated user"),
    # users
    _r("GET", "/api/users", user_views.list_users, "List users", query=user_views.UserListQuery),
    _r("POST", "/api/users", user_views.create_user, "Create a user (community admin)",
       body=user_views.UserCreateBody, root="user"),
    _r("POST", "/api/users/provision", provisioning_views.provision,
       "Provision users from a directory export (multipart file, gzip or XML; community "
       "admin or external system)"),
    _r("GET", "/api/users/search", user_views.search_users, "Search users",
       query=user_views.SearchQuery),
    _r("GET", "/api/users/suggest", user_views.suggest_users, "Suggest users (autocomplete)",
       query=user_views.SearchQuery),
    _r("GET", "/api/users/company_login/:company_login", user_views.show_by_company_login,
       "Show a user by company login"),
    _r("GET", "/api/users/:user_id", user_views.show_user, "Show a user"),
    _r("PUT", "/api/users/:user_id", user_views.update_user,
       "Update yourself, or anyone as community admin", body=user_views.UserUpdateBody,
       root="user"),
    _r("DELETE", "/api/users/:user_id", user_views.deactivate_user, "Deactivate a user"),
    _r("GET", "/api/users/:user_id/employees", user_views.list_employees,
       "Users managed by the user"),
    # follows
    _r("GET", "/api/users/:user_id/followers", follow_views.list_followers, "Followers"),
    _r("POST", "/api/users/:user_id/followers", follow_views.follow, "Follow the user"),
    _r("DELETE", "/api/users/:user_id/followers/:my_user_id", follow_views.unfollow_follower,
       "Stop following the user"),
    _r("GET", "/api/users/:user_id/following", follow_views.list_following, "Users followed"),
    _r("DELETE", "/api/users/:user_id/following/:id", follow_views.unfollow_following,
       "Stop following a user"),
    # groups
    _r("GET", "/api/groups", group_views.list_groups, "List groups",
       query=group_views.GroupListQuery),
    _r("POST", "/api/groups", group_views.create_group, "Create a group (you become its admin)",
       body=group_views.GroupCreateBody, root="group"),
    _r("GET", "/api/groups/search", group_views.search_groups, "Search groups by name",
       query=group_views.GroupSearchQuery),
    _r("GET", "/api/groups/mutual", group_views.mutual_groups,
       "Groups shared by user_id and other_user_id (default: you)",
       query=group_views.MutualQuery),
    _r("GET", "/api/groups/pinned", group_views.pinned_groups, "Your pinned groups",
       query=PageQuery),
    _r("GET", "/api/groups/:group_id", group_views.show_group, "Show a group"),
    _r("PUT", "/api/groups/:group_id", group_views.update_group, "Update a group (group admin)",
       body=group_views.GroupUpdateBody, root="group"),
    _r("DELETE", "/api/groups/:group_id", group_views.delete_group,
       "Destroy a group (group admin or community admin)"),
    _r("DELETE", "/api/groups/:group_id/archive", group_views.archive_group,
       "Archive a group (group admin)"),
    _r("POST", "/api/groups/:group_id/join", group_views.join_group, "Join a public group"),
    _r("POST", "/api/groups/:group_id/leave", group_views.leave_group, "Leave a group"),
    _r("POST", "/api/groups/:group_id/pin", group_views.pin_group, "Pin a group"),
    _r("DELETE", "/api/groups/:group_id/pin", group_views.unpin_group, "Unpin a group"),
    _r("GET", "/api/users/:user_id/groups", group_views.list_user_groups,
       "Groups you can see of which the user is a member", query=group_views.GroupListQuery),
    # group memberships
    _r("GET", "/api/group_memberships", membership_views.list_my_memberships,
       "Your group memberships", query=PageQuery),
    _r("GET", "/api/groups/:group_id/members", membership_views.list_members,
       "Members of a group", query=membership_views.MembersQuery),
    _r("GET", "/api/groups/:group_id/memberships", membership_views.list_memberships,
       "Memberships of a group (group_id: an id or a groupname)",
       query=membership_views.MembershipsQuery),
    _r("POST", "/api/groups/:group_id/memberships", membership_views.create_membership,
       "Add a member (group admin)", body=membership_views.MembershipBody, root="group_membership"),
    _r("POST", "/api/groups/:group_id/memberships/add_members", membership_views.add_members,
       "Add or invite members (group admin)", body=membership_views.AddMembersBody),
    _r("PUT", "/api/groups/:group_id/memberships/:membership_id",
       membership_views.update_membership, "Change a member's role (group admin)",
       body=membership_views.MembershipUpdateBody, root="group_membership"),
    _r("DELETE", "/api/groups/:group_id/memberships", membership_views.delete_membership,
       "Remove a member (group admin)", query=membership_views.RemoveMemberQuery),
    # group membership requests
    _r("POST", "/api/groups/:group_id/membership_requests",
       membership_views.create_membership_request, "Ask to join a private group"),
    _r("DELETE", "/api/groups/:group_id/membership_request",
       membership_views.cancel_membership_request, "Cancel your pending membership request"),
    _r("GET", "/api/groups/:group_id/membership_requests",
       membership_views.list_membership_requests, "Pending membership requests (group admin)",
       query=PageQuery),
    _r("POST", "/api/groups/:group_id/membership_requests/:request_id/approve",
       membership_views.approve_membership_request,
       "Approve a membership request (group admin)"),
    _r("POST", "/api/groups/:group_id/membership_requests/:request_id/reject",
       membership_views.reject_membership_request, "Reject a membership request (group admin)"),
    # attachments
    _r("POST", "/api/attachments", attachment_views.upload_attachment,
       "Upload a file (multipart/form-data, field attachment; 100 MB at most)",
       body=attachment_views.AttachmentUpload),
    _r("GET", "/api/attachments/:attachment_id", attachment_views.show_attachment,
       "302 redirect to the file or a thumbnail", query=attachment_views.AttachmentQuery),
    _r("GET", "/api/attachments/:attachment_id/:thumbnail/:filename",
       attachment_views.download_attachment,
       "The file (original) or a thumbnail (stream, stream_square, square45, scaled480)"),
    _r("DELETE", "/api/attachments/:attachment_id", attachment_views.delete_attachment,
       "Delete an attachment (its uploader or a community admin)"),
    _r("GET", "/api/users/:user_id/attachments", attachment_views.list_user_attachments,
       "Attachments the user uploaded", query=PageQuery),
    _r("GET", "/api/groups/:group_id/attachments", attachment_views.list_group_attachments,
       "Attachments of the group's messages", query=PageQuery),
    _r("GET", "/api/media_files/:id/:thumbnail/:filename", attachment_views.download_media_file,
       "An image attachment (original) or one of its thumbnails"),
    # the feed: messages, comments, likes, flags, polls, streams
    _r("GET", "/api/messages", message_views.list_messages,
       "Messages of your Home stream (or stream_id); tag / user_id search the company",
       query=message_views.MessageListQuery),
    _r("POST", "/api/messages", message_views.create_message, "Post a message",
       body=message_views.MessageCreateBody, root="message"),
    _r("GET", "/api/messages/search", message_views.search_messages,
       "Full-text search of messages", query=message_views.SearchQuery),
    _r("GET", "/api/messages/:message_id", message_views.show_message,
       "Show a message (id or id-slug)"),
    _r("PUT", "/api/messages/:message_id", message_views.update_message,
       "Edit a message (author, group admin, community admin)",
       body=message_views.MessageUpdateBody, root="message"),
    _r("DELETE", "/api/messages/:message_id", message_views.delete_message,
       "Delete a message (author, group admin, community admin)"),
    _r("GET", "/api/streams", stream_views.list_streams, "Your streams"),
    _r("GET", "/api/streams/primary", stream_views.primary_stream, "Your primary (Home) stream"),
    _r("GET", "/api/streams/:stream_id/messages", message_views.stream_messages,
       "Messages of a stream", query=message_views.MessageListQuery),
    _r("POST", "/api/streams/:stream_id/messages", message_views.create_stream_message,
       "Post a message in a stream", body=message_views.MessageCreateBody, root="message"),
    _r("GET", "/api/groups/:group_id/messages", message_views.group_messages,
       "Messages of a group", query=message_views.MessageListQuery),
    _r("POST", "/api/groups/:id/hide_message", message_views.hide_message,
       "Hide a message from the group's stream (group admin)",
       body=message_views.HideMessageBody),
    _r("GET", "/api/users/:user_id/messages", message_views.user_messages,
       "Messages posted by a user", query=message_views.MessageListQuery),
    _r("GET", "/api/external_systems/:external_system_id/messages",
       message_views.external_system_messages, "Messages posted by an external system",
       query=message_views.MessageListQuery),
    _r("GET", "/api/messages/:message_id/comments", comment_views.list_comments,
       "Comments of a message, oldest first", query=comment_views.CommentListQuery),
    _r("POST", "/api/messages/:message_id/comments", comment_views.create_comment,
       "Comment on a message", body=comment_views.CommentCreateBody, root="comment"),
    _r("GET", "/api/messages/:message_id/comments/:id", comment_views.show_comment,
       "Show a comment"),
    _r("PUT", "/api/messages/:message_id/comments/:id", comment_views.update_comment,
       "Edit a comment (its author)", body=comment_views.CommentUpdateBody, root="comment"),
    _r("DELETE", "/api/messages/:message_id/comments/:id", comment_views.delete_comment,
       "Delete a comment (author, group admin, community admin)"),
    _r("GET", "/api/messages/:message_id/likes", like_views.list_likes,
       "Who likes a message"),
    _r("POST", "/api/messages/:message_id/likes", like_views.create_like, "Like a message"),
    _r("GET", "/api/messages/:message_id/likes/:id", like_views.show_like, "Show a like"),
    _r("DELETE", "/api/messages/:message_id/likes/:like_id", like_views.delete_like,
       "Remove your like"),
    _r("GET", "/api/messages/:message_id/comments/:comment_id/likes", like_views.list_likes,
       "Who likes a comment"),
    _r("POST", "/api/messages/:message_id/comments/:comment_id/likes", like_views.create_like,
       "Like a comment"),
    _r("GET", "/api/messages/:message_id/comments/:comment_id/likes/:id",
       like_views.show_like, "Show a like of a comment"),
    _r("DELETE", "/api/messages/:message_id/comments/:comment_id/likes/:like_id",
       like_views.delete_like, "Remove your like of a comment"),
    _r("POST", "/api/messages/:message_id/flags", flag_views.create_flag,
       "Flag (bookmark) a message"),
    _r("DELETE", "/api/messages/:message_id/flags/:flag_id", flag_views.delete_flag,
       "Remove your flag"),
    _r("POST", "/api/polls", poll_views.create_poll, "Create a poll (bind it with "
       "message[poll_id])", body=poll_views.PollCreateBody, root="poll"),
    _r("GET", "/api/polls/:poll_id", poll_views.show_poll, "Show a poll"),
    _r("POST", "/api/polls/:poll_id/respond", poll_views.respond, "Answer a poll",
       body=poll_views.RespondBody),
    _r("GET", "/api/messages/:message_id/poll", poll_views.show_message_poll,
       "The poll of a message"),
    _r("POST", "/api/messages/:message_id/poll/respond", poll_views.respond_by_message,
       "Answer the poll of a message", body=poll_views.RespondBody),
    # custom profile fields
    _r("GET", "/api/custom_fields", custom_field_views.list_fields, "List custom fields"),
    _r("POST", "/api/custom_fields", custom_field_views.create_field, "Create a custom field",
       body=custom_field_views.CustomFieldBody),
    _r("GET", "/api/custom_fields/:id", custom_field_views.show_field, "Show a custom field"),
    _r("PUT", "/api/custom_fields/:id", custom_field_views.update_field,
       "Update a custom field", body=custom_field_views.CustomFieldBody),
    _r("DELETE", "/api/custom_fields/:id", custom_field_views.delete_field,
       "Delete a custom field"),
    # search suggestions
    _r("GET", "/api/search/suggestions", search_views.suggestions_view,
       "Autocomplete people and groups in headed sets", query=search_views.SuggestionsQuery),
    # community info and content filters
    _r("GET", "/api/community_info", community_views.show_community_info,
       "Community information"),
    _r("GET", "/api/content_filters", community_views.list_content_filters,
       "List content filters (blocked words)"),
    _r("POST", "/api/content_filters", community_views.create_content_filter,
       "Block a word (community admin)", body=community_views.ContentFilterBody),
    _r("DELETE", "/api/content_filters/:id", community_views.delete_content_filter,
       "Unblock a word (community admin)"),
    # meetings
    _r("GET", "/api/meetings", meeting_views.list_meeting_types,
       "Meeting types available to the community"),
    _r("POST", "/api/meetings", meeting_views.create_meeting, "Create a meeting",
       body=meeting_views.MeetingBody, root="meeting"),
    _r("GET", "/api/meetings/:id", meeting_views.show_meeting, "Show a meeting"),
    # badges
    _r("GET", "/api/badges", badge_views.list_badges, "The community's badges"),
    _r("GET", "/api/badges/:id", badge_views.show_badge, "Show a badge"),
    _r("GET", "/api/badges/:id/messages", thanks_views.badge_messages,
       "Announcements of thanks with the badge"),
    _r("GET", "/api/users/:user_id/badges/:id/messages", thanks_views.user_badge_messages,
       "Announcements of thanks with the badge received by the user"),
    # thanks
    _r("POST", "/api/thanks", thanks_views.create_thanks, "Thank colleagues",
       body=thanks_views.ThanksBody, root="thanks"),
    _r("GET", "/api/thanks", thanks_views.list_thanks, "List thanks",
       query=thanks_views.ThanksListQuery),
    _r("GET", "/api/thanks/:id", thanks_views.show_thanks, "Show a thanks"),
    _r("GET", "/api/users/:user_id/thanks", thanks_views.user_thanks,
       "Thanks received by the user", query=thanks_views.ThanksListQuery),
    # topics and tags
    _r("POST", "/api/topics", topic_views.create_topic, "Create a topic",
       body=topic_views.TopicBody, root="topic"),
    _r("GET", "/api/topics/search", topic_views.search_topics, "Search topics by name prefix",
       query=topic_views.TopicSearchQuery),
    _r("GET", "/api/topics/:topic_id", topic_views.show_topic, "A topic and its messages",
       query=message_views.MessageListQuery),
    _r("PUT", "/api/topics/:topic_id", topic_views.update_topic,
       "Describe a topic (its creator or a community admin)", body=topic_views.TopicBody,
       root="topic"),
    _r("GET", "/api/topics/:topic_id/contributors", topic_views.topic_contributors,
       "Who posted about a topic"),
    _r("GET", "/api/tags/:id", topic_views.show_tag, "A tag (a topic as a #hashtag)"),
    # conversations
    _r("GET", "/api/conversations", conversation_views.list_conversations,
       "Your conversations, latest activity first", query=conversation_views.ConversationListQuery),
    _r("POST", "/api/conversations", conversation_views.create_conversation,
       "Start a conversation (or reuse the one with the same members)",
       body=conversation_views.ConversationCreateBody, root="conversation"),
    _r("POST", "/api/conversations/acknowledge_all", conversation_views.acknowledge_all,
       "Mark all your conversations read"),
    _r("GET", "/api/conversations/:id", conversation_views.show_conversation,
       "Show a conversation"),
    _r("PUT", "/api/conversations/:id", conversation_views.update_conversation,
       "Rename a conversation", body=conversation_views.ConversationUpdateBody,
       root="conversation"),
    _r("POST", "/api/conversations/:id/acknowledge", conversation_views.acknowledge,
       "Mark a conversation read"),
    _r("PUT", "/api/conversations/:id/hide", conversation_views.hide,
       "Hide a one-to-one conversation"),
    _r("PUT", "/api/conversations/:id/unhide", conversation_views.unhide,
       "Unhide a one-to-one conversation"),
    _r("GET", "/api/conversations/:conversation_id/members", conversation_views.list_members,
       "Members of a conversation", query=PageQuery),
    _r("POST", "/api/conversations/:conversation_id/members", conversation_views.add_members,
       "Add members to a shared conversation", body=conversation_views.MembersBody),
    _r("DELETE", "/api/conversations/:conversation_id/members/me",
       conversation_views.leave_conversation, "Leave a shared conversation"),
    _r("GET", "/api/conversations/:conversation_id/activities",
       conversation_views.list_activities, "Activities of a conversation, newest first",
       query=PageQuery),
    _r("GET", "/api/conversations/:conversation_id/activities/:id",
       conversation_views.show_activity, "Show an activity"),
    _r("POST", "/api/conversations/:conversation_id/remarks", conversation_views.create_remark,
       "Post a remark", body=conversation_views.RemarkBody, root="remark"),
    # group chat
    _r("GET", "/api/groups/:group_id/chat_messages", chat_views.list_chat_messages,
       "Chat messages of a group, newest first", query=chat_views.ChatListQuery),
    _r("POST", "/api/groups/:group_id/chat_messages", chat_views.create_chat_message,
       "Post in a group's chat", body=chat_views.ChatMessageBody, root="chat_message"),
    _r("PATCH", "/api/groups/:group_id/chat_messages", chat_views.mark_chat_read,
       "Mark a group's chat read up to now"),
    # realtime
    _r("GET", "/api/realtime", realtime_views.realtime,
       "Websocket of live events (welcome, events, resume with since / Last-Event-ID)"),
    # notifications
    _r("GET", "/api/notifications", notification_views.list_notifications,
       "Your notifications, most recent first, with counts",
       query=notification_views.NotificationListQuery),
    _r("PUT", "/api/notifications/mark_all_read", notification_views.mark_all_read,
       "Mark all your notifications read"),
    _r("GET", "/api/notifications/:filter", notification_views.list_filtered_notifications,
       "Your notifications of one filter (thanks, groups, at_mentions, broadcast, replies, "
       "projects, followers, town_halls)", query=notification_views.NotificationListQuery),
    _r("POST", "/api/notifications/:id/read", notification_views.mark_read,
       "Mark one of your notifications read"),
    # client devices (push registrations)
    _r("GET", "/api/client_devices", client_device_views.list_devices, "Your devices"),
    _r("PUT", "/api/client_devices", client_device_views.register_device,
       "Register or update a device (registration_id + notification_type)",
       body=client_device_views.DeviceBody),
    _r("DELETE", "/api/client_devices", client_device_views.unregister_device,
       "Unregister a device", query=client_device_views.DeviceDeleteQuery),
    # external systems (reach admin)
    _r("GET", "/api/external_systems", external_system_views.list_external_systems,
       "External systems (reach admin)", query=PageQuery),
    _r("POST", "/api/external_systems", external_system_views.create_external_system,
       "Register an external system; the response carries its client secret, once",
       body=external_system_views.ExternalSystemBody, root="external_system"),
    _r("POST", "/api/external_systems/authentication",
       external_system_views.authenticate_external_system,
       "Check external system credentials (Authorization: ServiceApiClient <id>:<secret>)"),
    _r("GET", "/api/external_systems/:external_system_id",
       external_system_views.show_external_system, "Show an external system (reach admin)"),
    _r("PUT", "/api/external_systems/:external_system_id",
       external_system_views.update_external_system,
       "Update an external system; activate=true reactivates it",
       body=external_system_views.ExternalSystemBody, root="external_system"),
    _r("DELETE", "/api/external_systems/:external_system_id",
       external_system_views.deactivate_external_system, "Deactivate an external system"),
    _r("POST", "/api/external_systems/:external_system_id/messages",
       external_system_views.create_external_system_message,
       "Post a message on behalf of an external system (reach admin)",
       body=message_views.MessageCreateBody, root="message"),
    # reach extensions (reach admin)
    _r("GET", "/api/reach_extensions", reach_extension_views.list_reach_extensions,
       "Reach extensions (reach admin)", query=PageQuery),
    _r("POST", "/api/reach_extensions", reach_extension_views.create_reach_extension,
       "Create a reach extension", body=reach_extension_views.ReachExtensionBody,
       root="reach_extension"),
    _r("GET", "/api/reach_extensions/:reach_extension_id",
       reach_extension_views.show_reach_extension, "Show a reach extension"),
    _r("PUT", "/api/reach_extensions/:reach_extension_id",
       reach_extension_views.update_reach_extension, "Update a reach extension",
       body=reach_extension_views.ReachExtensionBody, root="reach_extension"),
    # group webhooks
    _r("GET", "/api/groups/:group_id/webhooks", webhook_views.list_webhooks,
       "Webhooks of a group, without secrets (group admin)",
       query=PageQuery),
    _r("POST", "/api/groups/:group_id/webhooks", webhook_views.create_webhook,
       "Create a group webhook; the response carries its secret and url, once (group admin)",
       body=webhook_views.WebhookCreateBody, root="webhook"),
    _r("DELETE", "/api/groups/:group_id/webhooks/:webhook_id", webhook_views.delete_webhook,
       "Delete a group webhook (group admin)"),
    _r("POST", "/api/webhooks/:webhook_identifier/:webhook_secret",
       webhook_views.incoming_webhook,
       "Post a message in the webhook's group (no credentials but the path; 204)",
       body=webhook_views.WebhookMessageBody),
]

_PARAM_RE = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")
_ID_PATTERN = r"\d+(?:-[^/]*?)?"
_ANY_PATTERN = r"[^/]+?"
# Parameters that are no id: a login, a notification filter, a thumbnail or file name, a secret.
_FREE_PARAMS = frozenset({
    "company_login", "filter", "thumbnail", "filename", "webhook_identifier", "webhook_secret",
    "name",
})
# Id parameters that also take a name on these paths: a groupname, a topic or tag name.
_NAMED_IDS = frozenset({
    ("/api/groups/:group_id/memberships", "group_id"),
    ("/api/topics/:topic_id", "topic_id"),
    ("/api/topics/:topic_id/contributors", "topic_id"),
    ("/api/tags/:id", "id"),
})


def aiohttp_path(path: str) -> str:
    """`/api/users/:user_id` -> `/api/users/{user_id:<id>}{_ext:(?:\\.json|\\.xml)?}`, where <id>
    is `\\d+(?:-[^/]*?)?` unless the parameter is a name (see _FREE_PARAMS)."""

    def param(match: re.Match[str]) -> str:
        name = match.group(1)
        free = name in _FREE_PARAMS or (path, name) in _NAMED_IDS
        return f"{{{name}:{_ANY_PATTERN if free else _ID_PATTERN}}}"

    if path.endswith("/:filename"):
        # a file's own name (`report.xml`) is no format suffix
        return _PARAM_RE.sub(param, path)
    return _PARAM_RE.sub(param, path) + r"{_ext:(?:\.json|\.xml)?}"


def _specificity(route: Route) -> tuple[int, ...]:
    # Literal segments before parameters, so /api/users/search wins over /api/users/:user_id.
    return tuple(1 if seg.startswith(":") else 0 for seg in route.path.strip("/").split("/"))


def add_routes(app: web.Application, routes: list[Route] | None = None) -> None:
    table = routes if routes is not None else ROUTES
    resources: dict[str, web.Resource] = {}
    # each create or update's body root, read by app.params.read_params
    roots: dict[web.AbstractRoute, BodyRoot] = app.setdefault(BODY_ROOTS, {})
    for route in sorted(table, key=_specificity):
        resource = resources.get(route.path)
        if resource is None:
            resource = app.router.add_resource(aiohttp_path(route.path))
            resources[route.path] = resource
        added = resource.add_route(route.method, route.handler)
        if route.root is not None and route.body is not None:
            roots[added] = BodyRoot.of(route.root, route.body)


def route_lines(routes: list[Route] | None = None) -> list[str]:
    return [f"{r.method} {r.path}" for r in (routes if routes is not None else ROUTES)]
