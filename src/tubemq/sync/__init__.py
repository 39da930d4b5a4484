"""The blocking facades of the public clients (``tubemq.Consumer``, ``tubemq.BoundConsumer``, ...):
the top of the client layers, above the bridge (:mod:`tubemq._bridge`), which alone crosses threads;
each forwards to its asyncio class (:mod:`tubemq.aio`)."""
