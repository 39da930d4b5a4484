"""The OpenTelemetry messaging semantic conventions this instrumentation follows: names and advice.

Kept in one place so spans, metrics and the docs (docs/guide/otel.md) name the same version.
"""

from __future__ import annotations

#: the semantic conventions release the names, span kinds and metric advice are taken from
SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

SYSTEM = "tubemq"

#: the spec's advisory buckets for ``messaging.client.operation.duration`` / ``messaging.process.duration`` (s)
DURATION_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                       7.5, 10.0)

OPERATION_DURATION = "messaging.client.operation.duration"
SENT_MESSAGES = "messaging.client.sent.messages"
CONSUMED_MESSAGES = "messaging.client.consumed.messages"
PROCESS_DURATION = "messaging.process.duration"

MESSAGING_SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
GROUP = "messaging.consumer.group.name"
CLIENT_ID = "messaging.client.id"
MESSAGE_ID = "messaging.message.id"
BODY_SIZE = "messaging.message.body.size"
BATCH_COUNT = "messaging.batch.message_count"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

__all__ = [name for name in dir() if name.isupper()]
