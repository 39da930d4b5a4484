"""The twin's data and result types: the NamedTuples both codecs share, and the twin's Message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ...inlongmsg import InLongMsg


class BrokerInfo(NamedTuple):
    """One broker of the cluster (§4.1)."""

    broker_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}"


class Partition(NamedTuple):
    """A topic partition on a broker; ``str()`` is the wire partition string (§4.3)."""

    broker_id: int
    host: str
    port: int
    topic: str
    partition_id: int

    @property
    def key(self) -> str:
        """partitionKey ``brokerId:topic:partitionId``."""
        return f"{self.broker_id}:{self.topic}:{self.partition_id}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}#{self.topic}:{self.partition_id}"


#: Alias kept for DESIGN.md's wording (`parse_topic_info -> list[TopicPartition]`).
TopicPartition = Partition


class SubscribeInfo(NamedTuple):
    """``consumerId@group#brokerId:host:port#topic:partitionId`` (§4.3)."""

    consumer_id: str
    group: str
    partition: Partition

    def __str__(self) -> str:
        return f"{self.consumer_id}@{self.group}#{self.partition}"


class Response(NamedTuple):
    """A decoded response payload (§2.5/§2.6)."""

    flag: int
    status: int  # 0 SUCCESS, 1 ERROR, 2 FATAL
    method: int  # -1 on error responses
    body: bytes  # RspResponseBody.data on success, b"" otherwise
    exception_name: str
    message: str
    protocol_ver: int  # -1 when absent


class Request(NamedTuple):
    """A decoded request payload (server side)."""

    flag: int
    service_type: int  # -1 when absent
    protocol_ver: int  # -1 when absent
    method: int
    timeout: int | None  # None when absent
    body: bytes


class SendResponse(NamedTuple):
    success: bool
    err_code: int
    err_msg: str
    message_id: int
    append_time: int
    append_offset: int
    require_auth: bool


class RawMessage(NamedTuple):
    """One TransferedMessage as stored by the broker (§3.7)."""

    message_id: int
    checksum: int
    payload: bytes
    flag: int


class GetMessageResult(NamedTuple):
    success: bool
    err_code: int
    err_msg: str
    messages: list[Any]  # list[Message]
    curr_offset: int
    min_limit_time: int
    esc_flow_ctrl: bool
    curr_data_dlt: int
    require_slow: bool
    max_offset: int
    dropped: int  # messages dropped by the §4.9 rules (bad checksum, bad header)


def message_repr(m: Any) -> str:
    """``repr()`` of a Message of either codec (the compiled class calls this one too)."""
    return (
        f"Message(topic={m.topic!r}, partition={m.partition.key if m.partition else None!r}, "
        f"offset={m.offset}, message_id={m.message_id}, stream_id={m.stream_id!r}, "
        f"data={m.data[:32]!r}{'...' if len(m.data) > 32 else ''})"
    )


MESSAGE_FIELDS = ("topic", "data", "attributes", "stream_id", "msg_time", "message_id", "flag", "partition",
                   "offset")


class Message:
    """A consumed (or to-be-sent) message.

    ``offset`` is None on a consumed message: a getMessage answer carries no per-message offset, and
    the batch's start plus 28 per message is wrong whenever the partition shares its store with
    siblings (their index entries interleave, §4.10). The exact positions are the batch's:
    ``Batch.start_offset`` and ``Batch.next_offset`` (docs/guide/consumer-offsets.md).
    """

    __slots__ = (
        "topic",
        "data",
        "_attributes",
        "stream_id",
        "msg_time",
        "message_id",
        "flag",
        "partition",
        "offset",
    )

    def __init__(
        self,
        topic: str,
        data: bytes,
        attributes: dict[str, str] | None = None,
        stream_id: str | None = None,
        msg_time: str | None = None,
        message_id: int = 0,
        flag: int = 0,
        partition: Partition | None = None,
        offset: int | None = -1,
    ) -> None:
        self.topic = topic
        self.data = data
        self._attributes = attributes if attributes is not None else {}
        self.stream_id = stream_id
        self.msg_time = msg_time
        self.message_id = message_id
        self.flag = flag
        self.partition = partition
        self.offset = offset

    @property
    def attributes(self) -> dict[str, str]:
        """The message's attributes (always a dict: setting None or deleting it leaves ``{}``)."""
        return self._attributes

    @attributes.setter
    def attributes(self, value: dict[str, str] | None) -> None:
        self._attributes = value if value is not None else {}

    def __delattr__(self, name: str) -> None:
        # the compiled Message's contract: deleting a field sets it to None (attributes to {})
        if name in MESSAGE_FIELDS:
            setattr(self, name, None)
        else:
            object.__delattr__(self, name)

    @property
    def value(self) -> bytes:
        return self.data

    def inlongmsg(self) -> InLongMsg:
        """Decode ``data`` as an InLong container (:func:`tubemq.inlongmsg.decode`)."""
        # imported on first use (most programs never decode InLong data); tubemq.inlongmsg sits below
        # the codec and imports none of it, so this points down
        from ...inlongmsg import decode

        return decode(self.data)

    def __repr__(self) -> str:
        return message_repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in MESSAGE_FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Message, tuple(getattr(self, s) for s in MESSAGE_FIELDS))
