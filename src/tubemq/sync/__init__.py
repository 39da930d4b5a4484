"""The blocking clients (``tubemq.Producer``, ...): facades over the asyncio clients, above the bridge."""
