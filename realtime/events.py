"""Realtime events and their encodings, each computed once.

An event is rendered to its websocket frame (`{"type":"event","id":"<id>",...}`) exactly once per
process; every socket on that process writes the very same `bytes` object, so the fan-out path
does no JSON work per socket. Between processes an event travels through Redis as a short text
header (id, channel, name) followed by that frame, so a receiving process reads the routing
fields without parsing the payload.

Subscription changes travel as ordinary events too (`control_event`): they are stored in the
same transaction as the membership change and get an id in the same sequence, which is what
makes "subscribe, then receive everything after the change" exact (see realtime/hub.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from realtime.channels import user_channel
from storage.events import Event, NewEvent

CONTROL_EVENT = "_subscriptions"
"""Name of the internal event that changes a user's live subscriptions; never sent to clients."""


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """What the hub moves around: routing fields plus the finished websocket frame."""

    id: int
    community_id: int
    channel: str
    name: str
    frame: bytes
    wire: bytes = b""
    """The whole server-to-client websocket frame (unmasked, uncompressed, so the same bytes
    for every socket), made once per event per process."""

    @property
    def is_control(self) -> bool:
        return self.name == CONTROL_EVENT

    def control(self) -> tuple[list[str], list[str]]:
        """(subscribe, unsubscribe) of a control event; parsed only by its user's sockets."""
        data = orjson.loads(self.frame)["data"]
        return list(data.get("subscribe", ())), list(data.get("unsubscribe", ()))

    def close_code(self) -> tuple[int, str] | None:
        """(code, reason) when this control event closes its user's sockets (`close_event`)."""
        data = orjson.loads(self.frame)["data"]
        code = data.get("close")
        return (int(code), str(data.get("reason", ""))) if code else None


def control_event(
    user_id: int, *, subscribe: Iterable[str] = (), unsubscribe: Iterable[str] = ()
) -> NewEvent:
    """The event that changes `user_id`'s live subscriptions on every process.

    Emit it (`w.emit`, app/actions/work.py) in the SAME unit of work as the membership change.
    Order inside one batch matters: when adding a member, put the control first so the new
    member also receives the events that follow it in the batch; when removing one, put it
    last so the member still sees its own removal.
    """
    return NewEvent(
        channel=user_channel(user_id),
        name=CONTROL_EVENT,
        data={"subscribe": list(subscribe), "unsubscribe": list(unsubscribe)},
    )


CLOSE_DEACTIVATED = 4003
CLOSE_CREDENTIALS_CHANGED = 4001


def close_event(user_id: int, code: int, reason: str) -> NewEvent:
    """The control event that closes every open socket of `user_id`, on every process, with
    `code` (deactivated: 4003, password changed: 4001). Emitted in the unit of work of the
    change, like any control event, so a socket set up concurrently sees it in its buffer."""
    return NewEvent(
        channel=user_channel(user_id), name=CONTROL_EVENT, data={"close": code, "reason": reason}
    )


def encode_frame(event: Event) -> bytes:
    return orjson.dumps(
        {
            "type": "event",
            "id": str(event.id),
            "channel": event.channel,
            "event": event.name,
            "data": event.data,
        }
    )


def websocket_text_frame(payload: bytes) -> bytes:
    """FIN + text opcode, the length, the payload (RFC 6455 5.2; servers never mask)."""
    size = len(payload)
    if size < 126:
        header = bytes((0x81, size))
    elif size < 65536:
        header = bytes((0x81, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x81, 127)) + size.to_bytes(8, "big")
    return header + payload


def encode(event: Event) -> EncodedEvent:
    frame = encode_frame(event)
    return EncodedEvent(
        event.id, event.community_id, event.channel, event.name, frame,
        websocket_text_frame(frame),
    )


def to_wire(event: EncodedEvent) -> bytes:
    """The Redis payload: `<id>\\n<channel>\\n<name>\\n<frame>`."""
    return b"%d\n%s\n%s\n%s" % (
        event.id,
        event.channel.encode(),
        event.name.encode(),
        event.frame,
    )


def from_wire(community_id: int, payload: bytes) -> EncodedEvent:
    id_, channel, name, frame = payload.split(b"\n", 3)
    return EncodedEvent(int(id_), community_id, channel.decode(), name.decode(), frame,
                        websocket_text_frame(frame))


def welcome_frame(user_id: int, last_event_id: int) -> bytes:
    return orjson.dumps(
        {"type": "welcome", "user_id": user_id, "last_event_id": str(last_event_id)}
    )


RESET_FRAME = b'{"type":"reset"}'
PONG_FRAME = b'{"type":"pong"}'
