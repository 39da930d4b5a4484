"""Canonical names of the ``format("tubemq")`` options (documentation spelling), matched case-insensitively."""

from __future__ import annotations

MASTER = "tubemq.master"
SUBSCRIBE = "subscribe"
ASSIGN = "assign"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
INCLUDE_ATTRIBUTES = "includeAttributes"
STREAM_IDS = "streamIds"
POLL_TIMEOUT_MS = "pollTimeoutMs"
NUM_RETRIES = "fetchOffset.numRetries"
RETRY_INTERVAL_MS = "fetchOffset.retryIntervalMs"
GROUP_ID_PREFIX = "groupIdPrefix"
COMMIT_OFFSETS_TO_GROUP = "commitOffsetsToGroup"
ARROW_BATCH_SIZE = "arrowBatchSize"
MSG_TIME_ZONE = "msgTimeZone"
TOPIC = "topic"
STAMP_ATTRIBUTES = "stampAttributes"
FLUSH_TIMEOUT_MS = "flushTimeoutMs"
VALUE_FORMAT = "valueFormat"
CAPACITY = "capacity"
COMPRESS = "compress"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
MIN_PARTITIONS = "minPartitions"
INCLUDE_HEADERS = "includeHeaders"
ADMIN_URL = "adminUrl"
#: Spark's Kafka name of ``pollTimeoutMs`` (same meaning: how long an executor waits for a fetch).
KAFKA_POLL_TIMEOUT_MS = "kafkaConsumer.pollTimeoutMs"
#: Spark Kafka source options this source does not implement: each is an error saying why, because
#: dropping one silently changes what a ported job reads.
KAFKA_UNSUPPORTED = {
    "subscribepattern": "subscribePattern is not supported: TubeMQ consumers subscribe to named topics; "
    "list them in 'subscribe'",
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported: the tubemq source never delays a "
    "micro-batch to wait for more data (it has maxOffsetsPerTrigger, an upper bound only)",
    "maxtriggerdelay": "maxTriggerDelay is not supported: it only goes with minOffsetsPerTrigger, which the "
    "tubemq source does not implement",
    "maxrecordsperpartition": "maxRecordsPerPartition is not supported: use minPartitions to split large "
    "partition ranges",
    "endingoffsetsbytimestampstrategy": "is not a Spark option; see startingOffsetsByTimestampStrategy",
}
TIMESTAMP_STRATEGIES = ("error", "latest")
#: ``valueFormat`` values: plain message bytes, or InLong containers exploded into records.
VALUE_FORMATS = ("raw", "inlongmsg")

CLIENT_PREFIX = "tubemq."

READ_OPTIONS = (
    MASTER,
    SUBSCRIBE,
    ASSIGN,
    STARTING_OFFSETS,
    ENDING_OFFSETS,
    MAX_OFFSETS_PER_TRIGGER,
    FAIL_ON_DATA_LOSS,
    INCLUDE_ATTRIBUTES,
    STREAM_IDS,
    POLL_TIMEOUT_MS,
    NUM_RETRIES,
    RETRY_INTERVAL_MS,
    GROUP_ID_PREFIX,
    COMMIT_OFFSETS_TO_GROUP,
    ARROW_BATCH_SIZE,
    MSG_TIME_ZONE,
    VALUE_FORMAT,
    STARTING_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_BY_TIMESTAMP_STRATEGY,
    ENDING_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    MIN_PARTITIONS,
    INCLUDE_HEADERS,
    ADMIN_URL,
)
WRITE_OPTIONS = (MASTER, TOPIC, STAMP_ATTRIBUTES, FLUSH_TIMEOUT_MS, MSG_TIME_ZONE, VALUE_FORMAT, CAPACITY, COMPRESS)
